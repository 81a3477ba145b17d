//! `--summarizer CMD`: hand the messages to be summarised to an operator's command (a local
//! model, a script) and take its stdout as the summary.
//!
//! The command runs under `sh -c` with the messages as one JSON document on stdin:
//! `{"previousSummary": string|null, "messages": [...]}` (messages in the runtime's context
//! shape). Success is exit status 0 with non-blank UTF-8 stdout within the timeout; anything
//! else is a [`Failure`] and the caller falls back to the built-in summary.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::jsjson;

/// Why the operator's summariser was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Spawn(String),
    Timeout(Duration),
    Status(String),
    Empty,
    NotUtf8,
    /// The request could not be produced (e.g. the transcript changed meanwhile).
    Input(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Spawn(e) => write!(f, "could not start it: {e}"),
            Failure::Timeout(d) => write!(f, "no answer within {}s", d.as_secs_f64()),
            Failure::Status(s) => write!(f, "it exited with {s}"),
            Failure::Empty => write!(f, "it printed nothing"),
            Failure::NotUtf8 => write!(f, "its output is not UTF-8"),
            Failure::Input(e) => write!(f, "its input could not be written: {e}"),
        }
    }
}

/// The JSON document sent on stdin.
pub fn request(messages: &[&Value], previous_summary: Option<&str>) -> String {
    jsjson::to_string_compact(&json!({"previousSummary": previous_summary, "messages": messages}))
}

/// Run `command` with what `input` writes on its stdin; its trimmed stdout on success.
/// `input` runs on the calling thread (it may read a database connection, which stays on its
/// thread) while other threads wait for the command, with the time limit, and read its
/// stdout; a write the command does not read (it exits first, or is stopped at the time
/// limit) is fine, but any other error of `input` (e.g. the transcript changed while it was
/// read back) makes the run a failure, whatever the command printed.
pub fn run(
    command: &str,
    input: &dyn Fn(&mut dyn Write) -> io::Result<()>,
    timeout: Duration,
) -> Result<String, Failure> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Failure::Spawn(e.to_string()))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    // Set on a timeout: the pipe ends give up instead of waiting for the pipes (a process
    // the command started may still hold them).
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop = &stop;
        let reader = scope.spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = stdout {
                read_all(s, &mut buf, stop);
            }
            buf
        });
        let waiter = scope.spawn(move || {
            let start = Instant::now();
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Ok(status),
                    Ok(None) if start.elapsed() >= timeout => {
                        stop.store(true, Ordering::SeqCst);
                        // The command runs in its own process group: end it and whatever it
                        // started.
                        if let Ok(pid) = i32::try_from(child.id()) {
                            // SAFETY: kill(2) with a negative pid signals that process group
                            // only.
                            unsafe { libc::kill(-pid, libc::SIGKILL) };
                        }
                        let _ = child.kill();
                        let _ = child.wait();
                        break Err(Failure::Timeout(timeout));
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => {
                        stop.store(true, Ordering::SeqCst);
                        break Err(Failure::Spawn(e.to_string()));
                    }
                }
            }
        });
        let input_error = stdin.and_then(|stdin| {
            let pipe = Pipe::new(stdin, stop);
            let mut w = io::BufWriter::with_capacity(1 << 16, pipe);
            match input(&mut w).and_then(|()| w.flush()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Some(e.to_string()),
                _ => None,
            }
            // The pipe closes here: the command sees the end of its input.
        });
        let status = waiter
            .join()
            .unwrap_or_else(|_| Err(Failure::Spawn("the waiting thread failed".into())));
        let out = reader.join().unwrap_or_default();
        let status = status?;
        if let Some(e) = input_error {
            return Err(Failure::Input(e));
        }
        if !status.success() {
            return Err(Failure::Status(status.to_string()));
        }
        let text = String::from_utf8(out).map_err(|_| Failure::NotUtf8)?;
        let text = crate::js::js_trim(&text);
        if text.is_empty() {
            return Err(Failure::Empty);
        }
        Ok(text.to_owned())
    })
}

/// Make a pipe end non-blocking, so that waiting on it can be given up.
fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a file descriptor this process owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// Wait up to 50 ms for `fd` to be ready for `events`.
fn wait_ready(fd: RawFd, events: libc::c_short) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 50) };
}

/// Read `from` to its end, unless `stop` is set while it is waiting.
fn read_all(mut from: ChildStdout, buf: &mut Vec<u8>, stop: &AtomicBool) {
    set_nonblocking(from.as_raw_fd());
    let mut chunk = [0u8; 1 << 16];
    loop {
        match from.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                wait_ready(from.as_raw_fd(), libc::POLLIN);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The command's stdin: its write errors are reported as a broken pipe (the command stopped
/// reading), so they are told apart from errors of the input itself; a write waiting on a
/// full pipe gives up once `stop` is set.
struct Pipe<'a> {
    stdin: ChildStdin,
    stop: &'a AtomicBool,
}

impl<'a> Pipe<'a> {
    fn new(stdin: ChildStdin, stop: &'a AtomicBool) -> Pipe<'a> {
        set_nonblocking(stdin.as_raw_fd());
        Pipe { stdin, stop }
    }
}

impl Write for Pipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.stdin.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.stop.load(Ordering::SeqCst) {
                        return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stopped"));
                    }
                    wait_ready(self.stdin.as_raw_fd(), libc::POLLOUT);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::BrokenPipe, e)),
                Ok(n) => return Ok(n),
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn text(s: &str) -> impl Fn(&mut dyn Write) -> io::Result<()> + '_ {
        move |w: &mut dyn Write| w.write_all(s.as_bytes())
    }

    #[test]
    fn passes_the_messages_and_takes_stdout() {
        let m = json!({"role":"user","content":"hé"});
        let input = request(&[&m], Some("prev"));
        assert_eq!(
            input,
            r#"{"previousSummary":"prev","messages":[{"role":"user","content":"hé"}]}"#
        );
        assert_eq!(run("cat", &text(&input), T).unwrap(), input);
        assert_eq!(
            run("echo '  summary text  '", &text(""), T).unwrap(),
            "summary text"
        );
        // A big input the command never reads is fine.
        let big = "x".repeat(4 << 20);
        assert_eq!(run("echo done", &text(&big), T).unwrap(), "done");
    }

    #[test]
    fn failures_are_reported() {
        assert_eq!(run("true", &text("x"), T), Err(Failure::Empty));
        assert!(matches!(
            run("exit 3", &text("x"), T),
            Err(Failure::Status(_))
        ));
        assert!(matches!(
            run("printf '\\377'", &text("x"), T),
            Err(Failure::NotUtf8)
        ));
        // An input that cannot be produced fails the run, even if the command succeeds.
        let broken = |w: &mut dyn Write| {
            w.write_all(b"{")?;
            Err(io::Error::other("the transcript changed"))
        };
        assert_eq!(
            run("cat", &broken, T),
            Err(Failure::Input("the transcript changed".into()))
        );
        let started = Instant::now();
        assert_eq!(
            run("sleep 5", &text("x"), Duration::from_millis(200)),
            Err(Failure::Timeout(Duration::from_millis(200)))
        );
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
