//! Session keys of every kind the maintenance code distinguishes: main, direct messages,
//! groups, channels, threads, Telegram topics, cron jobs and runs, subagents, heartbeats,
//! hooks, ACP, model-run probes, nodes, other agents and odd legacy shapes, for the agent
//! whose store is being filled.

use super::store::Gen;

impl Gen {
    /// A random key and the name of its kind.
    pub(super) fn key(&mut self) -> (String, &'static str) {
        let n = self.rng.range(1000, 99_999_999);
        let h = self.rng.hex(6);
        let kinds: [&'static str; 18] = [
            "main",
            "direct",
            "direct",
            "group",
            "channel",
            "thread",
            "topic",
            "cron",
            "cron-run",
            "subagent",
            "heartbeat",
            "hook",
            "acp",
            "model-run",
            "model-run",
            "node",
            "other",
            "odd",
        ];
        let kind = *self.rng.pick(&kinds);
        let key = match kind {
            "main" => "agent:main:main".to_string(),
            "direct" => match self.rng.below(5) {
                0 => format!("agent:main:direct:+1555{n}"),
                1 => format!("agent:main:telegram:direct:{n}"),
                2 => format!("agent:main:whatsapp:biz:direct:+44{n}"),
                3 => format!("agent:main:telegram:direct:Ana{h}"),
                _ => format!("agent:main:signal:direct:{}", self.rng.uuid()),
            },
            "group" => match self.rng.below(3) {
                0 => format!("agent:main:telegram:group:-100{n}"),
                1 => format!("agent:main:whatsapp:group:{n}@g.us"),
                _ => format!("agent:main:discord:group:{n}"),
            },
            "channel" => format!("agent:main:slack:channel:c{h}"),
            "thread" => match self.rng.below(3) {
                0 => format!(
                    "agent:main:slack:channel:c{h}:thread:{n}.{}",
                    self.rng.range(1, 999)
                ),
                1 => format!("agent:main:main:thread:{h}"),
                _ => format!("agent:main:discord:direct:{n}:thread:{h}"),
            },
            "topic" => format!(
                "agent:main:telegram:group:-100{n}:topic:{}",
                self.rng.range(1, 400)
            ),
            "cron" => format!("agent:main:cron:job-{h}"),
            "cron-run" => format!("agent:main:cron:job-{h}:run:{}", self.rng.uuid()),
            "subagent" => match self.rng.below(3) {
                0 => format!("subagent:{}", self.rng.uuid()),
                _ => format!("agent:main:subagent:{}", self.rng.uuid()),
            },
            "heartbeat" => self
                .rng
                .pick(&["agent:main:main:heartbeat", "agent:main:heartbeat"])
                .to_string(),
            "hook" => format!("agent:main:hook:gmail:{h}"),
            "acp" => format!("agent:main:acp:{}", self.rng.uuid()),
            "model-run" => {
                let u = self.rng.uuid();
                let u = if self.rng.chance(0.2) {
                    u.to_uppercase()
                } else {
                    u
                };
                format!("agent:main:explicit:model-run-{u}")
            }
            "node" => format!("agent:main:node:{h}"),
            "other" => match self.rng.below(2) {
                0 => format!("agent:ops:direct:{n}"),
                _ => "agent:ops:main".to_string(),
            },
            _ => match self.rng.below(4) {
                0 => "global".to_string(),
                1 => format!("{}", self.rng.range(1, 99_999)),
                2 => format!("Agent:Main:Telegram:Direct:Bob{h}"),
                _ => format!("agent:main:telegram:direct:{n}:extra"),
            },
        };
        // Keys of the agent whose store this is; "other agent" keys name someone else.
        let key = match (
            key.strip_prefix("agent:main:"),
            key.strip_prefix("agent:ops:"),
        ) {
            (Some(rest), _) if self.agent != "main" => format!("agent:{}:{rest}", self.agent),
            (_, Some(rest)) if self.agent == "ops" => format!("agent:main:{rest}"),
            _ => key,
        };
        (key, kind)
    }
}
