//! Session kinds: what a key is (main, direct, group, channel, thread, telegram topic, cron,
//! cron run, subagent, heartbeat, hook, acp, model-run probe, other), for reports and filters.

use crate::json::Json;

use super::{
    chat_type, is_acp_key, is_cron_key, is_cron_run_key, is_heartbeat_rest, is_model_run_key,
    is_subagent_key, is_telegram_topic_key, rest_or_key, thread_id,
};

/// What a session key is, from its shape (and, for groups, the entry's `chatType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SessionKind {
    Main,
    Direct,
    Group,
    Channel,
    Thread,
    TelegramTopic,
    Cron,
    CronRun,
    Subagent,
    Heartbeat,
    Hook,
    Acp,
    ModelRun,
    Other,
}

impl SessionKind {
    /// The name used on the command line (`inspect --kind`) and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Main => "main",
            SessionKind::Direct => "direct",
            SessionKind::Group => "group",
            SessionKind::Channel => "channel",
            SessionKind::Thread => "thread",
            SessionKind::TelegramTopic => "topic",
            SessionKind::Cron => "cron",
            SessionKind::CronRun => "cron-run",
            SessionKind::Subagent => "subagent",
            SessionKind::Heartbeat => "heartbeat",
            SessionKind::Hook => "hook",
            SessionKind::Acp => "acp",
            SessionKind::ModelRun => "model-run",
            SessionKind::Other => "other",
        }
    }

    /// Every kind, in report order.
    pub const ALL: [SessionKind; 14] = [
        SessionKind::Main,
        SessionKind::Direct,
        SessionKind::Group,
        SessionKind::Channel,
        SessionKind::Thread,
        SessionKind::TelegramTopic,
        SessionKind::Cron,
        SessionKind::CronRun,
        SessionKind::Subagent,
        SessionKind::Heartbeat,
        SessionKind::Hook,
        SessionKind::Acp,
        SessionKind::ModelRun,
        SessionKind::Other,
    ];

    /// Parse a `--kind` value.
    pub fn parse(s: &str) -> Option<SessionKind> {
        SessionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Classify a key (and its entry, for `chatType`) into a `SessionKind`.
pub fn classify(key: &str, entry: Option<&Json>) -> SessionKind {
    if is_model_run_key(key) {
        return SessionKind::ModelRun;
    }
    if is_subagent_key(key) {
        return SessionKind::Subagent;
    }
    if is_acp_key(key) {
        return SessionKind::Acp;
    }
    if is_cron_run_key(key) {
        return SessionKind::CronRun;
    }
    if is_cron_key(key) {
        return SessionKind::Cron;
    }
    let rest = rest_or_key(key);
    if rest.starts_with("hook:") || rest.starts_with("node:") || rest.starts_with("acp-bridge:") {
        return SessionKind::Hook;
    }
    if is_heartbeat_rest(&rest) {
        return SessionKind::Heartbeat;
    }
    if is_telegram_topic_key(key) {
        return SessionKind::TelegramTopic;
    }
    if thread_id(key).is_some() {
        return SessionKind::Thread;
    }
    if rest == "main" || key == "global" {
        return SessionKind::Main;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.len() >= 3 && (parts[1] == "group" || parts[1] == "channel") {
        return if parts[1] == "group" {
            SessionKind::Group
        } else {
            SessionKind::Channel
        };
    }
    if parts.contains(&"direct") || parts.contains(&"dm") {
        return SessionKind::Direct;
    }
    match chat_type(entry).as_str() {
        "group" => SessionKind::Group,
        "channel" => SessionKind::Channel,
        "thread" => SessionKind::Thread,
        "direct" | "dm" => SessionKind::Direct,
        _ => SessionKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(classify("agent:main:main", None), SessionKind::Main);
        assert_eq!(
            classify("agent:main:cron:j:run:r", None),
            SessionKind::CronRun
        );
        assert_eq!(classify("agent:main:cron:j", None), SessionKind::Cron);
        assert_eq!(
            classify("agent:main:telegram:direct:1", None),
            SessionKind::Direct
        );
        assert_eq!(
            classify("agent:main:slack:channel:c", None),
            SessionKind::Channel
        );
        assert_eq!(
            classify("agent:main:whatsapp:group:g", None),
            SessionKind::Group
        );
        assert_eq!(
            classify("agent:main:slack:channel:c:thread:1", None),
            SessionKind::Thread
        );
        assert_eq!(
            classify("agent:main:telegram:group:g:topic:1", None),
            SessionKind::TelegramTopic
        );
        assert_eq!(
            classify("agent:main:subagent:a", None),
            SessionKind::Subagent
        );
        assert_eq!(
            classify("agent:main:heartbeat", None),
            SessionKind::Heartbeat
        );
        assert_eq!(classify("agent:main:hook:x", None), SessionKind::Hook);
        assert_eq!(classify("agent:main:acp:x", None), SessionKind::Acp);
        assert_eq!(classify("weird", None), SessionKind::Other);
        assert_eq!(SessionKind::parse("cron-run"), Some(SessionKind::CronRun));
    }
}
