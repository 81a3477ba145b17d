//! Where a case's stores live and how the command line names them: the configured agents
//! (`agents.list`, with or without a default), `session.store` (unset, a `{agentId}` template
//! that is absolute, `~`-relative or relative to the working directory, a template that puts
//! every agent's store in one directory, or one path shared by every agent), the working
//! directory, `HOME` / `OPENCLAW_HOME`, and the target flags: `--store` spelled absolute,
//! relative, with `~` or with `{agentId}`; `--agent` (also unknown ids and odd spellings);
//! `--all-agents`; no target at all; and conflicting combinations.

use super::{ROOT, Rng};

/// The stores of one case and how they are reached.
pub struct Layout {
    /// `agents.list` as JSON5 (None: no agents configured, so only `main`).
    pub agents_json5: Option<String>,
    pub default_agent: String,
    /// `session.store` as written in the config (placeholders allowed).
    pub session_store: Option<String>,
    /// Working directory of both programs, relative to the root.
    pub cwd_rel: String,
    /// Where `~` points, relative to the root.
    pub home_rel: String,
    /// `OPENCLAW_HOME` for both programs, when set (placeholders allowed).
    pub openclaw_home: Option<String>,
    /// The target flags (placeholders allowed).
    pub target: Vec<String>,
    /// Whether the target selects the stores through the config rather than `--store`
    /// (the reference then first tries a gateway, which the config points nowhere).
    pub via_config: bool,
    /// The stores the run works on, `(agent id, store path relative to the root)`, the first
    /// one gets the rich content; empty when the target is an error.
    pub stores: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// `normalizeAgentId` for the simple ids used here.
fn norm(id: &str) -> String {
    id.trim().to_lowercase()
}

/// `path.relative(from, to)` for clean relative paths without `..` components.
fn relative(from: &str, to: &str) -> String {
    let f: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let t: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
    parts.extend(t[common..].iter().map(|s| s.to_string()));
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}/{b}")
    }
}

impl Layout {
    pub fn random(rng: &mut Rng) -> Layout {
        let mut notes = Vec::new();
        let (agents_json5, raw_ids, default_raw): (Option<&str>, Vec<&str>, &str) =
            match rng.below(6) {
                0 | 1 => (None, vec!["main"], "main"),
                2 => (
                    Some(r#"[ { id: "main" }, { id: "ops" } ]"#),
                    vec!["main", "ops"],
                    "main",
                ),
                3 => (
                    Some(r#"[ { id: "ops" }, { id: "main", default: true } ]"#),
                    vec!["ops", "main"],
                    "main",
                ),
                4 => (
                    Some(r#"[ { id: "Ops", default: true }, { id: "main" } ]"#),
                    vec!["Ops", "main"],
                    "Ops",
                ),
                _ => (Some(r#"[ { id: "main" } ]"#), vec!["main"], "main"),
            };
        let agent_ids: Vec<String> = raw_ids.iter().map(|i| norm(i)).collect();
        let default_agent = norm(default_raw);
        let (home_rel, openclaw_home) = match rng.below(5) {
            0 => ("ohome".to_string(), Some(format!("{ROOT}/ohome"))),
            1 => ("home/oc".to_string(), Some("~/oc".to_string())),
            _ => ("home".to_string(), None),
        };
        // session.store and where it puts an agent's store.
        let loc = rng.below(12);
        let cwd_rel = match rng.below(10) {
            0..=3 => String::new(),
            4..=6 => "work".to_string(),
            _ => "@SDIR@".to_string(), // the first store's directory, resolved below
        };
        let cwd_rel = if loc == 8 && cwd_rel == "@SDIR@" {
            "work".to_string()
        } else {
            cwd_rel
        };
        let session_store: Option<String> = match loc {
            0..=5 => None,
            6 => Some(format!("{ROOT}/stores/{{agentId}}/sessions.json")),
            7 => Some("~/stores/{agentId}/sessions.json".to_string()),
            8 => Some("stores/{agentId}/sessions.json".to_string()),
            9 => Some(format!("{ROOT}/flat/{{agentId}}.json")),
            10 => Some("~/shared/sessions.json".to_string()),
            _ => Some(format!("{ROOT}/stores/{{agentId}}/state.json")),
        };
        let store_of = |id: &str| -> String {
            match loc {
                0..=5 => format!("state/agents/{id}/sessions/sessions.json"),
                6 => format!("stores/{id}/sessions.json"),
                7 => format!("{home_rel}/stores/{id}/sessions.json"),
                8 => join(&cwd_rel, &format!("stores/{id}/sessions.json")),
                9 => format!("flat/{id}.json"),
                10 => format!("{home_rel}/shared/sessions.json"),
                _ => format!("stores/{id}/state.json"),
            }
        };
        if let Some(s) = &session_store {
            notes.push(format!("session.store = {s:?}"));
        }
        let mut via_config = true;
        let mut stores: Vec<(String, String)> = Vec::new();
        let target: Vec<String> = match rng.below(40) {
            0..=23 => {
                via_config = false;
                // --store: usually the default agent's store, sometimes another agent's.
                let agent = if agent_ids.len() > 1 && rng.chance(0.2) {
                    agent_ids
                        .iter()
                        .find(|a| **a != default_agent)
                        .cloned()
                        .unwrap()
                } else {
                    default_agent.clone()
                };
                let rel = store_of(&agent);
                stores.push((agent.clone(), rel.clone()));
                vec!["--store".to_string(), "@STORE@".to_string()]
            }
            24..=28 => {
                let (spelled, id) = if rng.chance(0.1) {
                    ("nobody".to_string(), None)
                } else {
                    let id = rng.pick(&agent_ids).clone();
                    let spelled = match rng.below(4) {
                        0 => id.to_uppercase(),
                        1 => format!(" {id} "),
                        _ => id.clone(),
                    };
                    (spelled, Some(id))
                };
                if let Some(id) = id {
                    stores.push((id.clone(), store_of(&id)));
                }
                vec!["--agent".to_string(), spelled]
            }
            29..=34 => {
                let mut order = vec![default_agent.clone()];
                order.extend(agent_ids.iter().filter(|a| **a != default_agent).cloned());
                for id in order {
                    let rel = store_of(&id);
                    if !stores.iter().any(|(_, r)| *r == rel) {
                        stores.push((id, rel));
                    }
                }
                vec!["--all-agents".to_string()]
            }
            35..=37 => {
                stores.push((default_agent.clone(), store_of(&default_agent)));
                Vec::new()
            }
            38 => vec![
                "--store".to_string(),
                format!("{ROOT}/x/sessions.json"),
                "--agent".to_string(),
                default_agent.clone(),
            ],
            _ => vec![
                "--agent".to_string(),
                default_agent.clone(),
                "--all-agents".to_string(),
            ],
        };
        let cwd_rel = if cwd_rel == "@SDIR@" {
            match stores.first() {
                Some((_, rel)) => rel.rsplit_once('/').map_or("", |(d, _)| d).to_string(),
                None => String::new(),
            }
        } else {
            cwd_rel
        };
        let target = target
            .into_iter()
            .map(|a| {
                if a == "@STORE@" {
                    spell_store(rng, &stores[0].1, &cwd_rel, &home_rel, &default_agent)
                } else {
                    a
                }
            })
            .collect();
        Layout {
            agents_json5: agents_json5.map(str::to_string),
            default_agent,
            session_store,
            cwd_rel,
            home_rel,
            openclaw_home,
            target,
            via_config,
            stores,
            notes,
        }
    }

    /// The JSON5 lines this layout adds to the config's top level.
    pub fn config_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(a) = &self.agents_json5 {
            out.push(format!("agents: {{ list: {a} }}"));
        }
        if self.via_config {
            // Without --store the reference asks a gateway first; point it at a closed port
            // so that it falls back to local maintenance, as clawkeeper always works.
            out.push("gateway: { auth: { token: \"parity-suite\" }, port: 9 }".to_string());
        }
        out
    }
}

/// Spell `--store` for the store at `rel`: absolute, relative to the working directory (with
/// or without `./`), with `~`, or with `{agentId}` in place of the default agent's id.
fn spell_store(rng: &mut Rng, rel: &str, cwd_rel: &str, home_rel: &str, agent: &str) -> String {
    let from_cwd = relative(cwd_rel, rel);
    let mut forms = vec![
        format!("{ROOT}/{rel}"),
        from_cwd.clone(),
        format!("./{from_cwd}"),
    ];
    if let Some(under_home) = rel.strip_prefix(&format!("{home_rel}/")) {
        forms.push(format!("~/{under_home}"));
    }
    let seg = format!("/{agent}/");
    if rel.contains(&seg) {
        forms.push(format!("{ROOT}/{}", rel.replacen(&seg, "/{agentId}/", 1)));
        forms.push(relative(cwd_rel, rel).replacen(&seg, "/{agentId}/", 1));
    }
    rng.pick(&forms).clone()
}

#[test]
fn relative_paths() {
    assert_eq!(relative("", "a/b"), "a/b");
    assert_eq!(relative("work", "a/b"), "../a/b");
    assert_eq!(relative("a/b", "a/b/c.json"), "c.json");
    assert_eq!(relative("a/b/c", "a/x"), "../../x");
}
