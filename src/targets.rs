//! Which store(s) a command works on: `--store`, `--agent`, `--all-agents` or the default
//! agent, resolved exactly as OpenClaw's `resolveSessionStoreTargets` does (`~` and `{agentId}`
//! expansion, deduplication by store path, the same conflict and unknown-agent messages).
//! Plain values in, plain values out: the clap layer lives in `cmd`.

use std::path::PathBuf;

use crate::config::{Config, Env, normalize_agent_id};
use crate::js::js_trim;

/// One store to work on and the agent it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub agent_id: String,
    /// Absolute path of the `sessions.json`.
    pub store_path: PathBuf,
}

/// `resolveStorePath(store, {agentId})`: the store path for one agent. `store` is the
/// `--store` value or `session.store` (a path or a template with `{agentId}`).
pub fn store_path_for(store: Option<&str>, agent_id: &str, env: &Env) -> PathBuf {
    let agent_id = normalize_agent_id(agent_id);
    match store.filter(|s| !s.is_empty()) {
        None => env
            .state_dir()
            .join("agents")
            .join(&agent_id)
            .join("sessions")
            .join("sessions.json"),
        Some(s) => {
            let expanded = s.replace("{agentId}", &agent_id);
            env.resolve_user_path(&expanded)
        }
    }
}

/// Why the target flags name no store, in the reference's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Flags that cannot be used together (a usage error).
    #[error("{0}")]
    Conflict(String),
    /// `--agent` names an agent the config does not have.
    #[error("{0}")]
    UnknownAgent(String),
}

/// Resolve the targets.
pub fn resolve(
    cfg: &Config,
    env: &Env,
    store: Option<&str>,
    agent: Option<&str>,
    all_agents: bool,
) -> Result<Vec<Target>, TargetError> {
    let default_agent = cfg.default_agent_id();
    let has_agent = agent.is_some_and(|a| !js_trim(a).is_empty());
    let store = store.filter(|s| !s.is_empty());
    if has_agent && all_agents {
        return Err(TargetError::Conflict(
            "--agent and --all-agents cannot be used together".into(),
        ));
    }
    if store.is_some() && (has_agent || all_agents) {
        return Err(TargetError::Conflict(
            "--store cannot be combined with --agent or --all-agents".into(),
        ));
    }
    let configured = cfg.session_store();
    if let Some(s) = store {
        return Ok(vec![Target {
            store_path: store_path_for(Some(s), &default_agent, env),
            agent_id: default_agent,
        }]);
    }
    if all_agents {
        let mut out: Vec<Target> = Vec::new();
        for id in cfg.session_store_agent_ids() {
            let t = Target {
                store_path: store_path_for(configured.as_deref(), &id, env),
                agent_id: id,
            };
            if !out.iter().any(|o| o.store_path == t.store_path) {
                out.push(t);
            }
        }
        return Ok(out);
    }
    if has_agent {
        let raw = agent.unwrap_or_default();
        let requested = normalize_agent_id(raw);
        if !cfg.agent_ids().contains(&requested) {
            return Err(TargetError::UnknownAgent(format!(
                "Unknown agent id \"{raw}\". Use \"openclaw agents list\" to see configured agents."
            )));
        }
        return Ok(vec![Target {
            store_path: store_path_for(configured.as_deref(), &requested, env),
            agent_id: requested,
        }]);
    }
    Ok(vec![Target {
        store_path: store_path_for(configured.as_deref(), &default_agent, env),
        agent_id: default_agent,
    }])
}

/// Where an agent that moved to SQLite keeps its database: `<sessionsDir>/../agent/openclaw-agent.sqlite`.
pub fn sqlite_marker(store_path: &std::path::Path) -> Option<PathBuf> {
    let dir = match store_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    sqlite_marker_of_dir(dir)
}

/// [`sqlite_marker`] for a sessions directory. The directory is resolved first (a relative
/// `.` has no parent otherwise), and a database that is itself a symlink still counts.
/// A transcript in a subdirectory of `agents/<id>/sessions` belongs to that agent too, so
/// every enclosing directory named `sessions` is checked as well.
pub fn sqlite_marker_of_dir(sessions_dir: &std::path::Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(sessions_dir).ok()?;
    let enclosing = dir.ancestors().skip(1).filter(|a| a.ends_with("sessions"));
    std::iter::once(dir.as_path())
        .chain(enclosing)
        .filter_map(|d| Some(d.parent()?.join("agent").join("openclaw-agent.sqlite")))
        .find(|marker| std::fs::symlink_metadata(marker).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> Env {
        Env {
            state_dir: Some("/st".into()),
            config_path: None,
            home: Some("/home/u".into()),
        }
    }

    #[test]
    fn default_and_store() {
        let cfg = Config::default();
        let t = resolve(&cfg, &env(), None, None, false).unwrap();
        assert_eq!(
            t,
            vec![Target {
                agent_id: "main".into(),
                store_path: "/st/agents/main/sessions/sessions.json".into()
            }]
        );
        let t = resolve(&cfg, &env(), Some("~/x/{agentId}/s.json"), None, false).unwrap();
        assert_eq!(t[0].store_path, PathBuf::from("/home/u/x/main/s.json"));
    }

    #[test]
    fn conflicts_and_unknown_agents() {
        let cfg = Config::from_value(
            json!({"agents": {"list": [{"id": "a"}, {"id": "b"}]}, "session": {"store": "/s/{agentId}.json"}}),
        );
        assert_eq!(
            resolve(&cfg, &env(), None, Some("a"), true)
                .unwrap_err()
                .to_string(),
            "--agent and --all-agents cannot be used together"
        );
        assert_eq!(
            resolve(&cfg, &env(), Some("x"), None, true)
                .unwrap_err()
                .to_string(),
            "--store cannot be combined with --agent or --all-agents"
        );
        assert!(
            resolve(&cfg, &env(), None, Some("zz"), false)
                .unwrap_err()
                .to_string()
                .starts_with("Unknown agent id \"zz\"")
        );
        let all = resolve(&cfg, &env(), None, None, true).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].store_path, PathBuf::from("/s/b.json"));
        let shared = Config::from_value(
            json!({"agents": {"list": [{"id": "a"}, {"id": "b"}]}, "session": {"store": "/s/one.json"}}),
        );
        assert_eq!(resolve(&shared, &env(), None, None, true).unwrap().len(), 1);
    }
}
