//! `--summarizer CMD`: hand the messages to be summarised to an operator's command (a local
//! model, a script) and take its stdout as the summary.
//!
//! The command runs under `sh -c` with the messages as one JSON document on stdin:
//! `{"previousSummary": string|null, "messages": [...]}` (messages in the runtime's context
//! shape). Success is exit status 0 with non-blank UTF-8 stdout within the timeout; anything
//! else is a [`Failure`] and the caller falls back to the built-in summary.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
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
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Spawn(e) => write!(f, "could not start it: {e}"),
            Failure::Timeout(d) => write!(f, "no answer within {}s", d.as_secs_f64()),
            Failure::Status(s) => write!(f, "it exited with {s}"),
            Failure::Empty => write!(f, "it printed nothing"),
            Failure::NotUtf8 => write!(f, "its output is not UTF-8"),
        }
    }
}

/// The JSON document sent on stdin.
pub fn request(messages: &[&Value], previous_summary: Option<&str>) -> String {
    jsjson::to_string_compact(&json!({"previousSummary": previous_summary, "messages": messages}))
}

/// Run `command` with `input` on stdin; its trimmed stdout on success.
pub fn run(command: &str, input: &str, timeout: Duration) -> Result<String, Failure> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Failure::Spawn(e.to_string()))?;
    let mut stdin = child.stdin.take();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            // A command that does not read its input is fine.
            let _ = s.write_all(input.as_bytes());
        }
    });
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= timeout => {
                // The command runs in its own process group: end it and whatever it started.
                if let Ok(pid) = i32::try_from(child.id()) {
                    // SAFETY: kill(2) with a negative pid signals that process group only.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::Timeout(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Failure::Spawn(e.to_string())),
        }
    };
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(Failure::Status(status.to_string()));
    }
    let text = String::from_utf8(out).map_err(|_| Failure::NotUtf8)?;
    let text = super::classify::js_trim(&text);
    if text.is_empty() {
        return Err(Failure::Empty);
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn passes_the_messages_and_takes_stdout() {
        let m = json!({"role":"user","content":"hé"});
        let input = request(&[&m], Some("prev"));
        assert_eq!(
            input,
            r#"{"previousSummary":"prev","messages":[{"role":"user","content":"hé"}]}"#
        );
        assert_eq!(run("cat", &input, T).unwrap(), input);
        assert_eq!(
            run("echo '  summary text  '", "", T).unwrap(),
            "summary text"
        );
    }

    #[test]
    fn failures_are_reported() {
        assert_eq!(run("true", "x", T), Err(Failure::Empty));
        assert!(matches!(run("exit 3", "x", T), Err(Failure::Status(_))));
        assert!(matches!(
            run("printf '\\377'", "x", T),
            Err(Failure::NotUtf8)
        ));
        let started = Instant::now();
        assert_eq!(
            run("sleep 5", "x", Duration::from_millis(200)),
            Err(Failure::Timeout(Duration::from_millis(200)))
        );
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
