//! Documents written as `JSON.stringify(doc, null, 2)` writes them, one piece at a time.
//!
//! A report with one row per store entry (hundreds of thousands of rows in a neglected store)
//! must not become one `serde_json::Value` tree, nor one `String`, before it is printed: each
//! row would cost kilobytes as an ordered map. [`Pretty`] writes the outer objects and arrays
//! itself and each row as a small `Value` (through [`jsjson::write_value`], so the bytes are
//! those of [`jsjson::to_string_pretty`] on the whole document), and [`IoSink`] sends the text
//! to a buffered writer as it is made.

use std::io::Write;

use serde_json::Value;

use crate::jsjson::{self, Sink};

/// A [`Sink`] that writes to `W` through a buffer. The first write error is kept (and every
/// later write skipped); [`IoSink::finish`] returns it.
pub struct IoSink<W: Write> {
    out: std::io::BufWriter<W>,
    error: Option<std::io::Error>,
}

impl<W: Write> IoSink<W> {
    pub fn new(out: W) -> IoSink<W> {
        IoSink {
            out: std::io::BufWriter::with_capacity(1 << 16, out),
            error: None,
        }
    }

    /// Flush, and return the first error of any write.
    pub fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

impl<W: Write> Sink for IoSink<W> {
    fn push_str(&mut self, s: &str) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(s.as_bytes())
        {
            self.error = Some(e);
        }
    }
    fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }
}

/// An open object or array: its closing bracket, and whether it has a member yet.
struct Open {
    close: char,
    filled: bool,
}

/// A pretty-printed document (indent 2) written piece by piece: open containers with
/// [`Pretty::begin_object`] / [`Pretty::begin_array`], name an object's member with
/// [`Pretty::key`] before its value, and close each with [`Pretty::end`]. Empty containers
/// come out as `{}` and `[]`, as `JSON.stringify` writes them.
pub struct Pretty<'a, S: Sink> {
    out: &'a mut S,
    open: Vec<Open>,
    /// A key was written and its value is next (no separator before it).
    after_key: bool,
}

impl<'a, S: Sink> Pretty<'a, S> {
    pub fn new(out: &'a mut S) -> Pretty<'a, S> {
        Pretty {
            out,
            open: Vec::new(),
            after_key: false,
        }
    }

    /// Before a member or element: its separator and indentation (none after a key).
    fn next_item(&mut self) {
        if std::mem::take(&mut self.after_key) {
            return;
        }
        let level = self.open.len();
        if let Some(top) = self.open.last_mut() {
            if top.filled {
                self.out.push(',');
            }
            top.filled = true;
            indent(self.out, level);
        }
    }

    fn begin(&mut self, open: char, close: char) {
        self.next_item();
        self.out.push(open);
        self.open.push(Open {
            close,
            filled: false,
        });
    }

    pub fn begin_object(&mut self) {
        self.begin('{', '}');
    }

    pub fn begin_array(&mut self) {
        self.begin('[', ']');
    }

    /// The name of the next member of the open object; its value follows.
    pub fn key(&mut self, k: &str) {
        self.next_item();
        jsjson::write_string(self.out, k);
        self.out.push_str(": ");
        self.after_key = true;
    }

    /// A whole value: an element of the open array, or the value after [`Pretty::key`].
    pub fn value(&mut self, v: &Value) {
        self.next_item();
        jsjson::write_value(self.out, v, Some(2), self.open.len());
    }

    /// `key` and its whole value.
    pub fn member(&mut self, k: &str, v: &Value) {
        self.key(k);
        self.value(v);
    }

    /// Close the innermost open object or array.
    pub fn end(&mut self) {
        let Some(top) = self.open.pop() else { return };
        if top.filled {
            indent(self.out, self.open.len());
        }
        self.out.push(top.close);
    }
}

fn indent<S: Sink>(out: &mut S, level: usize) {
    out.push('\n');
    for _ in 0..level {
        out.push_str("  ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Write `v` through [`Pretty`], opening every object and array itself down to `depth`.
    fn streamed(p: &mut Pretty<String>, v: &Value, depth: usize) {
        match v {
            Value::Object(m) if depth > 0 => {
                p.begin_object();
                for (k, item) in m {
                    p.key(k);
                    streamed(p, item, depth - 1);
                }
                p.end();
            }
            Value::Array(items) if depth > 0 => {
                p.begin_array();
                for item in items {
                    streamed(p, item, depth - 1);
                }
                p.end();
            }
            _ => p.value(v),
        }
    }

    #[test]
    fn streamed_documents_are_the_pretty_text() {
        let docs = [
            json!({}),
            json!([]),
            json!({"a": [], "b": {}, "c": [[]], "d": [{}], "e": null}),
            json!({"rows": [{"k": "x\n\"y\"", "n": 1.5, "m": [1, 2, {"z": []}]}, {"k": "é"}], "totals": {"n": 0}}),
            json!([[1, [2, [3, []]]], "s", true, {"deep": {"er": {"est": [{}]}}}]),
            json!({"1": 1, "0": 0, "key with \u{1}": -0.0}),
        ];
        for doc in &docs {
            for depth in 0..6 {
                let mut out = String::new();
                streamed(&mut Pretty::new(&mut out), doc, depth);
                assert_eq!(out, jsjson::to_string_pretty(doc), "{doc} at depth {depth}");
            }
        }
    }

    #[test]
    fn a_failed_write_is_reported_and_stops_writing() {
        struct Full(usize);
        impl Write for Full {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                if self.0 + b.len() > 10 {
                    return Err(std::io::Error::other("full"));
                }
                self.0 += b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = IoSink::new(Full(0));
        let long = "x".repeat(1 << 17);
        sink.push_str(&long);
        sink.push_str("more");
        assert_eq!(sink.finish().unwrap_err().to_string(), "full");
        let mut ok = IoSink::new(Vec::new());
        ok.push_str("{}");
        ok.push('\n');
        assert!(ok.finish().is_ok());
    }
}
