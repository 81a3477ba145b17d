//! The operator's `openclaw.json` as OpenClaw reads it, reduced to what clawkeeper needs.
//!
//! Owns: where the state dir and the config file are (`$OPENCLAW_STATE_DIR`, `~/.openclaw`,
//! `$OPENCLAW_CONFIG_PATH`, `--config`), reading the JSON5 file into a `serde_json::Value`
//! (a missing file is OpenClaw's defaults), the agent list and default agent id, the
//! `session.*` settings and the maintenance resolution in `maintenance`. Nothing here knows
//! about clap; callers pass plain values.

pub mod grammar;
pub mod maintenance;
pub mod validate;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::js::js_trim;

/// Environment values the resolution depends on, captured once so tests can inject them.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub state_dir: Option<String>,
    pub config_path: Option<String>,
    pub home: Option<PathBuf>,
}

/// `normalize` of OpenClaw's home-dir module: trimmed; empty, `undefined` and `null` are unset.
fn home_value(v: Option<std::ffi::OsString>) -> Option<String> {
    let v = v?.to_string_lossy().into_owned();
    let t = js_trim(&v);
    (!t.is_empty() && t != "undefined" && t != "null").then(|| t.to_string())
}

/// Replace a leading `~` that is followed by nothing, `/` or `\` (`/^~(?=$|[\\/])/`).
fn expand_tilde(input: &str, home: &str) -> Option<String> {
    let rest = input.strip_prefix('~')?;
    (rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\'))
        .then(|| format!("{home}{rest}"))
}

impl Env {
    /// Read `OPENCLAW_STATE_DIR`, `OPENCLAW_CONFIG_PATH`, `OPENCLAW_HOME` and `HOME`, as
    /// OpenClaw's `resolveRequiredHomeDir` does: `OPENCLAW_HOME` first (a leading `~` in it is
    /// the OS home), else `HOME`, else `USERPROFILE`, else the account's home directory,
    /// else the working directory.
    pub fn from_process() -> Env {
        let os_home = home_value(std::env::var_os("HOME"))
            .or_else(|| home_value(std::env::var_os("USERPROFILE")))
            .or_else(|| home_value(std::env::home_dir().map(Into::into)));
        let home = match home_value(std::env::var_os("OPENCLAW_HOME")) {
            Some(h) if h.starts_with('~') => match &os_home {
                Some(os) => Some(expand_tilde(&h, os).unwrap_or(h)),
                None if expand_tilde(&h, "").is_some() => None,
                None => Some(h),
            },
            Some(h) => Some(h),
            None => os_home,
        };
        let home = Some(match home {
            Some(h) => crate::store::paths::resolve(Path::new(&h)),
            None => crate::store::paths::resolve(Path::new(".")),
        });
        Env {
            state_dir: std::env::var("OPENCLAW_STATE_DIR").ok(),
            config_path: std::env::var("OPENCLAW_CONFIG_PATH").ok(),
            home,
        }
    }

    /// The home directory (`~`).
    pub fn home(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    /// Expand a leading `~` (alone, or before `/` or `\`) and make the path absolute against
    /// the cwd, lexically.
    pub fn resolve_user_path(&self, input: &str) -> PathBuf {
        let home = self.home();
        let expanded = expand_tilde(input, &home.to_string_lossy());
        crate::store::paths::resolve(Path::new(expanded.as_deref().unwrap_or(input)))
    }

    /// `$OPENCLAW_STATE_DIR` (trimmed, `~` expanded), else `~/.openclaw`.
    pub fn state_dir(&self) -> PathBuf {
        match self.state_dir.as_deref().map(js_trim) {
            Some(dir) if !dir.is_empty() => self.resolve_user_path(dir),
            _ => self.home().join(".openclaw"),
        }
    }
}

/// The parsed `openclaw.json` (an empty object when there is no file).
#[derive(Debug, Clone)]
pub struct Config {
    pub root: Value,
    /// The file it came from, when one was read.
    pub source: Option<PathBuf>,
    /// Why the JSON-era releases would refuse this config, when only the SQLite-era ones
    /// accept it (for example `maxDiskBytes: false`): stores of the JSON era are refused.
    pub json_era_problem: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: Value::Object(Default::default()),
            source: None,
            json_era_problem: None,
        }
    }
}

impl Config {
    /// Load the config: `explicit` (`--config`), else `$OPENCLAW_CONFIG_PATH`, else
    /// `<stateDir>/openclaw.json`. A missing file gives the defaults; an unreadable or
    /// unparsable file is an error naming it.
    pub fn load(explicit: Option<&Path>, env: &Env) -> Result<Config> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => match env.config_path.as_deref().map(js_trim) {
                Some(p) if !p.is_empty() => env.resolve_user_path(p),
                _ => env.state_dir().join("openclaw.json"),
            },
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => {
                return Ok(Config::default());
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read config {}", path.display()));
            }
        };
        if let Some(at) = nested_too_deep(&text) {
            let p = json5::Position::from_offset(at, &text);
            anyhow::bail!(
                "{}: {p}: invalid JSON5: nested more than {MAX_DEPTH} levels deep",
                path.display()
            );
        }
        let root: Value =
            json5::from_str(&text).map_err(|e| anyhow::anyhow!(syntax_error(&path, &text, &e)))?;
        let root = if root.is_object() {
            root
        } else {
            Value::Object(Default::default())
        };
        let problems = validate::problems(&root);
        let mut json_era_problem = None;
        if !problems.is_empty() {
            let message = format!(
                "OpenClaw config {} is invalid: {}",
                path.display(),
                problems.join("; ")
            );
            let sqlite = validate::problems_sqlite(&root);
            if !sqlite.is_empty() {
                anyhow::bail!(message);
            }
            // Valid for the SQLite-era releases only: fine for agents that moved to SQLite,
            // refused for a JSON-era store (see `cmd::resolve_targets`).
            json_era_problem = Some(message);
        }
        Ok(Config {
            root,
            source: Some(path),
            json_era_problem,
        })
    }

    /// A config from an already-parsed value (tests, other commands).
    pub fn from_value(root: Value) -> Config {
        Config {
            root,
            source: None,
            json_era_problem: None,
        }
    }

    /// `cfg.a.b.c` with JavaScript's optional chaining.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        let mut v = &self.root;
        for p in path {
            v = v.as_object()?.get(*p)?;
        }
        Some(v)
    }

    /// `agents.list` entries that are objects.
    fn agent_entries(&self) -> Vec<&serde_json::Map<String, Value>> {
        match self.get(&["agents", "list"]) {
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_object).collect(),
            _ => Vec::new(),
        }
    }

    /// Configured agent ids, normalised and deduplicated (`["main"]` when none).
    pub fn agent_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for entry in self.agent_entries() {
            let id = normalize_agent_id(entry.get("id").and_then(Value::as_str).unwrap_or(""));
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            ids.push(DEFAULT_AGENT_ID.to_string());
        }
        ids
    }

    /// The default agent: the first entry marked `default`, else the first entry, else `main`.
    pub fn default_agent_id(&self) -> String {
        let agents = self.agent_entries();
        if agents.is_empty() {
            return DEFAULT_AGENT_ID.to_string();
        }
        let chosen = agents
            .iter()
            .find(|a| a.get("default").is_some_and(js_truthy))
            .or(agents.first())
            .and_then(|a| a.get("id"))
            .and_then(Value::as_str)
            .map(js_trim)
            .unwrap_or("");
        normalize_agent_id(if chosen.is_empty() { "main" } else { chosen })
    }

    /// Agent ids whose stores `--all-agents` visits (configured agents plus ACP agents).
    pub fn session_store_agent_ids(&self) -> Vec<String> {
        let mut ids = self.agent_ids();
        let mut add = |raw: &str| {
            let raw = js_trim(raw);
            if raw.is_empty() || raw == "*" {
                return;
            }
            let id = normalize_agent_id(raw);
            if !ids.contains(&id) {
                ids.push(id);
            }
        };
        if let Some(Value::String(s)) = self.get(&["acp", "defaultAgent"]) {
            add(s);
        }
        if let Some(Value::Array(list)) = self.get(&["acp", "allowedAgents"]) {
            for v in list {
                if let Value::String(s) = v {
                    add(s);
                }
            }
        }
        for agent in self.agent_entries() {
            let runtime = agent.get("runtime").and_then(Value::as_object);
            if runtime.and_then(|r| r.get("type")).and_then(Value::as_str) == Some("acp") {
                let acp_agent = runtime
                    .and_then(|r| r.get("acp"))
                    .and_then(|a| a.get("agent"))
                    .and_then(Value::as_str)
                    .or_else(|| agent.get("id").and_then(Value::as_str));
                if let Some(id) = acp_agent {
                    add(id);
                }
            }
        }
        ids
    }

    /// `session.dmScope`, default `main`.
    pub fn dm_scope(&self) -> String {
        match self.get(&["session", "dmScope"]) {
            Some(Value::String(s)) => s.clone(),
            _ => "main".to_string(),
        }
    }

    /// `session.store` (a path or a template with `{agentId}`), when set.
    pub fn session_store(&self) -> Option<String> {
        match self.get(&["session", "store"]) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        }
    }
}

/// A JSON5 syntax error on one line: `<file>: line L column C: invalid JSON5: <what>`.
/// The parser places an unexpected end of input at the start of the value it was reading;
/// the end of the file is where the operator has to look.
fn syntax_error(path: &Path, text: &str, e: &json5::Error) -> String {
    let (what, position) = match e.code() {
        Some(code) => {
            let what = code.to_string();
            match what.strip_prefix("EOF ") {
                Some(rest) => (
                    format!("unexpected end of file {rest}"),
                    Some(json5::Position::from_offset(text.len(), text)),
                ),
                None => (what, e.position()),
            }
        }
        // Messages from serde itself; the parser appends the position, given separately here.
        None => {
            let full = e.to_string();
            let what = match e.position() {
                Some(p) => full
                    .strip_suffix(&format!(" at {p}"))
                    .map_or(full.clone(), str::to_owned),
                None => full,
            };
            (what, e.position())
        }
    };
    match position {
        Some(p) => format!("{}: {p}: invalid JSON5: {what}", path.display()),
        None => format!("{}: invalid JSON5: {what}", path.display()),
    }
}

/// How deep arrays and objects may nest in `openclaw.json` (serde_json's limit for
/// `sessions.json`): the parser recurses once per level, and a hostile file must be an error,
/// not a stack overflow. OpenClaw's own configs nest a handful of levels.
const MAX_DEPTH: usize = 128;

/// The byte offset of the first `[` or `{` nested deeper than [`MAX_DEPTH`], skipping
/// strings and comments.
fn nested_too_deep(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let line_end = |i: usize| {
        matches!(b[i], b'\n' | b'\r')
            || b[i..].starts_with("\u{2028}".as_bytes())
            || b[i..].starts_with("\u{2029}".as_bytes())
    };
    let (mut i, mut depth) = (0, 0usize);
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && !line_end(i) {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(b.len(), |j| i + j + 3);
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// OpenClaw's default agent id.
pub const DEFAULT_AGENT_ID: &str = "main";

/// JavaScript truthiness of a JSON value.
pub fn js_truthy<T: crate::jsjson::Tree>(v: &T) -> bool {
    use crate::jsjson::Node;
    match v.node() {
        Node::Null => false,
        Node::Bool(b) => b,
        Node::Number(n) => n.is_some_and(|f| f != 0.0 && !f.is_nan()),
        Node::String(s) => !s.is_empty(),
        Node::Array(_) | Node::Object(_) => true,
    }
}

/// `normalizeAgentId`: lowercase; invalid characters become `-`; at most 64 chars; `main`
/// when nothing is left.
pub fn normalize_agent_id(value: &str) -> String {
    let trimmed = js_trim(value);
    if trimmed.is_empty() {
        return DEFAULT_AGENT_ID.to_string();
    }
    let lower = trimmed.to_lowercase();
    let valid = {
        let b = trimmed.as_bytes();
        !b.is_empty()
            && b.len() <= 64
            && b[0].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
    };
    if valid {
        return lower;
    }
    let mut out = String::new();
    let mut in_bad = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
            in_bad = false;
        } else if !in_bad {
            out.push('-');
            in_bad = true;
        }
    }
    let out = out.trim_start_matches('-').trim_end_matches('-');
    // `.slice(0, 64)` counts UTF-16 units; the string is ASCII here.
    let out: String = out.chars().take(64).collect();
    if out.is_empty() {
        "main".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_ids_and_default() {
        let c = Config::from_value(
            json!({"agents": {"list": [{"id": "Work"}, {"id": "ops", "default": true}, {"id": "work"}]}}),
        );
        assert_eq!(c.agent_ids(), vec!["work", "ops"]);
        assert_eq!(c.default_agent_id(), "ops");
        assert_eq!(Config::default().agent_ids(), vec!["main"]);
        assert_eq!(Config::default().default_agent_id(), "main");
    }

    #[test]
    fn syntax_errors_are_one_line_with_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw.json");
        for (text, line, col) in [
            ("{\n  session: {\n    store: \"x\",,\n  }\n}\n", 3, 16),
            ("{\"a\": [1,}", 1, 10),
            ("{\n", 2, 1),
            ("{a: \"x", 1, 7),
            ("", 1, 1),
            ("{a: 1} /* open", 1, 15),
            ("{a: 01}", 1, 5),
            ("{a: 1 b: 2}", 1, 7),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = Config::load(Some(&path), &Env::default()).unwrap_err();
            let msg = format!("{err:#}");
            assert!(!msg.contains('\n'), "{msg}");
            let want = format!(
                "{}: line {line} column {col}: invalid JSON5: ",
                path.display()
            );
            assert!(msg.starts_with(&want), "{msg:?} should start with {want:?}");
            assert!(msg.len() > want.len() + 3, "{msg}");
        }
    }

    #[test]
    fn json5_as_openclaw_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw.json");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Config::load(Some(&path), &Env::default()).map(|c| c.root)
        };
        let text = "// top\n{\n  /* block */ a: 1, 'b': 0x1F, \"a\": 2,\n  c: [+1, -0xff, .5, 5., 1e3,],\n  d: Infinity, e: -Infinity, f: NaN,\n  g: 'it\\'s \\x41\\u0042 \\\n',\n  $h_i: 12345678901234567890,\n}\n";
        let v = load(text).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"a":2,"b":31,"c":[1,-255,0.5,5.0,1000.0],"d":null,"e":null,"f":null,"g":"it's AB ","$h_i":12345678901234567890}"#
        );
        // Deep nesting is an error, not a stack overflow; brackets in strings and comments
        // do not count.
        let deep = format!("{{a: {}{}}}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let err = format!("{:#}", load(&deep).unwrap_err());
        assert!(
            err.contains("line 1 column 132: invalid JSON5: nested more than 128"),
            "{err}"
        );
        let s = format!(
            "{{a: \"{0}\", b: '{0}', // {0}\n /* {0} */ c: 1}}",
            "[".repeat(200)
        );
        assert_eq!(load(&s).unwrap()["c"], 1);
        assert!(load(&"[".repeat(100_000)).is_err());
    }

    #[test]
    fn tilde_forms() {
        let env = Env {
            home: Some("/h".into()),
            ..Default::default()
        };
        assert_eq!(env.resolve_user_path("~"), PathBuf::from("/h"));
        assert_eq!(env.resolve_user_path("~/a/b"), PathBuf::from("/h/a/b"));
        assert_eq!(env.resolve_user_path("~\\a"), PathBuf::from("/h\\a"));
        assert!(env.resolve_user_path("~x/a").ends_with("~x/a"));
        assert_eq!(
            expand_tilde("~/oc", "/home/u").as_deref(),
            Some("/home/u/oc")
        );
        assert_eq!(expand_tilde("~oc", "/home/u"), None);
        assert_eq!(home_value(Some(" null ".into())), None);
        assert_eq!(home_value(Some(" /h ".into())).as_deref(), Some("/h"));
    }

    #[test]
    fn normalize_agent_ids() {
        assert_eq!(normalize_agent_id(" Main "), "main");
        assert_eq!(normalize_agent_id("a b!c"), "a-b-c");
        assert_eq!(normalize_agent_id("--x--"), "x");
        assert_eq!(normalize_agent_id("!!!"), "main");
        assert_eq!(normalize_agent_id(""), "main");
    }
}
