#!/usr/bin/env python3
"""Regenerates fixtures/demo/ (the demo state dir). Deterministic: fixed ids and dates.

Run from the repository root: python3 scripts/make-demo-fixture.py
See fixtures/demo/README.md for what the demo contains and why its dates look the way they do.
"""
import json, os, shutil, datetime, hashlib

ROOT = "fixtures/demo"
SDIR = os.path.join(ROOT, "agents/main/sessions")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
MTIMES = {}


def ms(s):
    return int(datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


def iso(m):
    return datetime.datetime.fromtimestamp(m / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (m % 1000)


def dump(o):
    return json.dumps(o, separators=(",", ":"), ensure_ascii=False)


class T:
    """Writes one transcript in the runtime's JSONL format."""

    def __init__(self, sid, start, seed):
        self.sid, self.clock, self.n, self.leaf = sid, ms(start), seed * 4096, None
        self.lines = [dump({"type": "session", "version": 3, "id": sid, "timestamp": iso(self.clock),
                            "cwd": "/home/ana/.openclaw/workspace"})]

    def push(self, kind, **extra):
        self.clock += 2100
        self.n += 1
        eid = "%08x" % (self.n * 2654435761 % 2**32)
        self.lines.append(dump({"type": kind, "id": eid, "parentId": self.leaf, "timestamp": iso(self.clock), **extra}))
        self.leaf = eid
        return eid

    def user(self, text, image=False):
        content = [{"type": "text", "text": text}, {"type": "image", "data": PNG, "mimeType": "image/png"}] if image else text
        return self.push("message", message={"role": "user", "content": content, "timestamp": self.clock + 2100})

    def assistant(self, content, stop="stop"):
        return self.push("message", message={
            "role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {"input": 2310, "output": 64, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2374,
                      "cost": {"input": 0.00693, "output": 0.00096, "cacheRead": 0, "cacheWrite": 0, "total": 0.00789}},
            "stopReason": stop, "timestamp": self.clock + 2100})

    def text(self, t):
        return self.assistant([{"type": "text", "text": t}])

    def tool(self, name, args, result, image=False, call="toolu_01"):
        self.assistant([{"type": "thinking", "thinking": "Check with the %s tool first." % name, "thinkingSignature": "EqQBCkYIBxgCKkD0"},
                        {"type": "toolCall", "id": call, "name": name, "arguments": args}], "toolUse")
        content = [{"type": "text", "text": result}]
        if image:
            content.append({"type": "image", "data": PNG, "mimeType": "image/png"})
        return self.push("message", message={"role": "toolResult", "toolCallId": call, "toolName": name,
                                             "content": content, "isError": False, "timestamp": self.clock + 2100})

    def start(self):
        self.push("model_change", provider="anthropic", modelId="claude-sonnet-4-5")
        self.push("thinking_level_change", thinkingLevel="low")

    def text_out(self):
        return "\n".join(self.lines) + "\n"


def write(name, text, mtime):
    path = os.path.join(SDIR, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    MTIMES[name] = mtime


def chat(sid, start, turns, image=False, noreply=0, seed=1):
    t = T(sid, start, seed)
    t.start()
    for i in range(turns):
        t.user("Can you check my notes for today and summarise them?", image and i == 0)
        t.tool("read", {"path": "notes/today.md"}, "- call the bank\n- water the plants\n", image and i == 0, "toolu_%02d" % (seed * 10 + i))
        t.text("Two things today: call the bank and water the plants.")
    for _ in range(noreply):
        t.text("NO_REPLY")
    return t


def main():
    shutil.rmtree(os.path.join(ROOT, "agents"), ignore_errors=True)
    os.makedirs(SDIR)
    store = {}
    FRESH = "2026-11-0%dT09:00:00.000Z"
    STALE = "2016-03-0%dT09:00:00.000Z"

    def entry(key, sid, updated, **fields):
        e = {"sessionId": sid, "updatedAt": ms(updated)}
        e.update(fields)
        store[key] = e
        return e

    # 1. The main session: images, thinking, tool calls, a NO_REPLY run, a compaction,
    #    an abandoned branch, a referenced compaction checkpoint and trajectory sidecars.
    main = "0b6f3c1e-4d2a-4e8b-9a51-7c2d9e0f1a23"
    t = chat(main, "2026-11-02T08:00:00.000Z", 3, image=True, seed=1)
    t.user("[cron] nightly backup finished")
    for _ in range(4):
        t.text("NO_REPLY")
    kept = t.user("Switch the app to port 8080 please.")
    t.tool("edit", {"path": "config/app.yaml", "oldText": "port: 80", "newText": "port: 8080"}, "Successfully replaced text in config/app.yaml.", call="toolu_edit")
    t.text("Done: app.yaml now binds 8080.")
    t.push("compaction", summary="## Decisions\nNotes summarised daily; the app moved to port 8080.", firstKeptEntryId=kept,
           tokensBefore=18230, details={"readFiles": ["notes/today.md"], "modifiedFiles": ["config/app.yaml"]}, fromHook=True)
    fork = t.leaf
    t.user("Also restart the service.")
    abandoned = t.text("I can't restart services from here.")
    t.leaf = fork
    t.push("branch_summary", fromId=abandoned, summary="Abandoned path: user asked for a restart; assistant declined.")
    t.user("Instead, give me the restart command.")
    t.push("custom", customType="openclaw.cache-ttl", data={"timestamp": t.clock})
    t.text("Run: sudo systemctl restart app")
    write(main + ".jsonl", t.text_out(), "2026-11-06T09:00:00Z")
    cp = main + ".checkpoint.6f1e2d3c-4b5a-4968-8776-5a4b3c2d1e0f.jsonl"
    write(cp, chat(main, "2026-11-02T08:00:00.000Z", 3, image=True, seed=1).text_out(), "2026-11-04T09:00:00Z")
    write(main + ".trajectory.jsonl", dump({"traceSchema": "openclaw-trajectory", "schemaVersion": 1, "source": "runtime", "sessionId": main}) + "\n"
          + dump({"type": "turn", "ts": "2026-11-06T09:00:00.000Z", "tokens": 18230}) + "\n", "2026-11-06T09:00:00Z")
    write(main + ".trajectory-path.json", dump({"traceSchema": "openclaw-trajectory-pointer", "schemaVersion": 1, "sessionId": main,
          "runtimeFile": "/home/ana/.openclaw/agents/main/sessions/%s.trajectory.jsonl" % main}) + "\n", "2026-11-06T09:00:00Z")
    entry("agent:main:main", main, FRESH % 6, label="Ana (main)", chatType="direct", model="claude-sonnet-4-5", modelProvider="anthropic",
          thinkingLevel="low", systemSent=True, compactionCount=1,
          compactionCheckpoints=[{"checkpointId": "6f1e2d3c-4b5a-4968-8776-5a4b3c2d1e0f", "reason": "auto", "createdAt": ms("2026-11-04T09:00:00Z"),
                                  "preCompaction": {"sessionId": main, "sessionFile": cp, "leafId": "a1000009"},
                                  "postCompaction": {"sessionId": main, "sessionFile": main + ".jsonl"}}])

    # 2. Direct messages: fresh ones (retired by --fix-dm-scope, some capped), a stale one.
    dms = [("agent:main:telegram:direct:48151623", "5d1c7e2a-8b3f-4a6d-9e1c-2f4a6b8d0c1e", 5, "Bob (Telegram)"),
           ("agent:main:whatsapp:direct:+15551230001", "7a2b9c4d-1e3f-4a5b-8c6d-9e0f1a2b3c4d", 4, "Carla (WhatsApp)"),
           ("agent:main:signal:direct:+15551230002", "8c3d0e5f-2a4b-4c6d-9e8f-0a1b2c3d4e5f", 3, "Dan (Signal)"),
           ("agent:main:direct:+15551230003", "9d4e1f6a-3b5c-4d7e-8f9a-1b2c3d4e5f6a", 2, None)]
    for i, (key, sid, day, label) in enumerate(dms):
        write(sid + ".jsonl", chat(sid, FRESH % day, 1 + i % 2, seed=10 + i).text_out(), "2026-11-0%dT09:00:00Z" % day)
        extra = {"label": label} if label else {}
        entry(key, sid, FRESH % day, chatType="direct", lastChannel=key.split(":")[2], **extra)
    stale_dm = "1e5f2a7b-4c6d-4e8f-9a0b-2c3d4e5f6a7b"
    write(stale_dm + ".jsonl", chat(stale_dm, STALE % 1, 2, seed=20).text_out(), "2016-03-01T09:00:00Z")
    entry("agent:main:telegram:direct:2718281", stale_dm, STALE % 1, chatType="direct", label="Old pen pal")

    # 3. Group, topic, channel and thread sessions: protected from pruning and capping.
    grp = "2f6a3b8c-5d7e-4f9a-8b1c-3d4e5f6a7b8c"
    write(grp + ".jsonl", chat(grp, STALE % 2, 2, image=True, seed=30).text_out(), "2016-03-02T09:00:00Z")
    entry("agent:main:telegram:group:-1001234567890", grp, STALE % 2, chatType="group", label="Family group")
    topic = "3a7b4c9d-6e8f-4a0b-9c2d-4e5f6a7b8c9d"
    write(topic + "-topic-42.jsonl", chat(topic, FRESH % 5, 1, seed=31).text_out(), "2026-11-05T09:00:00Z")
    entry("agent:main:telegram:group:-1001234567890:topic:42", topic, FRESH % 5, sessionFile=topic + "-topic-42.jsonl", chatType="group")
    chan = "4b8c5d0e-7f9a-4b1c-8d3e-5f6a7b8c9d0e"
    write(chan + ".jsonl", chat(chan, FRESH % 1, 1, seed=32).text_out(), "2026-11-01T09:00:00Z")
    entry("agent:main:discord:channel:998877665544", chan, FRESH % 1, label="#ops")
    thr = "5c9d6e1f-8a0b-4c2d-9e4f-6a7b8c9d0e1f"
    write(thr + ".jsonl", chat(thr, STALE % 3, 1, seed=33).text_out(), "2016-03-03T09:00:00Z")
    entry("agent:main:slack:channel:c07ops:thread:1730000000.000100", thr, STALE % 3, label="#ops")

    # 4. Synthetic sessions: cron (+ runs), subagent, heartbeat, hook, acp, model-run probe.
    cron = "6d0e7f2a-9b1c-4d3e-8f5a-7b8c9d0e1f2a"
    write(cron + ".jsonl", chat(cron, FRESH % 6, 1, noreply=3, seed=40).text_out(), "2026-11-06T09:00:00Z")
    entry("agent:main:cron:nightly-digest", cron, FRESH % 6, label="nightly digest")
    run = "7e1f8a3b-0c2d-4e4f-9a6b-8c9d0e1f2a3b"
    write(run + ".jsonl", chat(run, FRESH % 6, 1, noreply=2, seed=41).text_out(), "2026-11-06T09:00:00Z")
    entry("agent:main:cron:nightly-digest:run:" + run, run, FRESH % 6, label="nightly digest")
    old_run = "8f2a9b4c-1d3e-4f5a-8b7c-9d0e1f2a3b4c"
    write(old_run + ".jsonl", chat(old_run, STALE % 4, 1, noreply=2, seed=42).text_out(), "2016-03-04T09:00:00Z")
    write(old_run + ".trajectory.jsonl", dump({"traceSchema": "openclaw-trajectory", "schemaVersion": 1, "source": "runtime", "sessionId": old_run}) + "\n", "2016-03-04T09:00:00Z")
    entry("agent:main:cron:weekly-report:run:" + old_run, old_run, STALE % 4, label="weekly report")
    sub = "9a3b0c5d-2e4f-4a6b-9c8d-0e1f2a3b4c5d"
    write(sub + ".jsonl", chat(sub, FRESH % 3, 2, seed=43).text_out(), "2026-11-03T09:00:00Z")
    entry("agent:main:subagent:" + sub, sub, FRESH % 3, label="research helper")
    hb = "0b4c1d6e-3f5a-4b7c-8d9e-1f2a3b4c5d6e"
    t = T(hb, FRESH % 4, 50)
    t.start()
    for i in range(3):
        t.user("Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.")
        t.text("NO_REPLY")
        t.text("NO_REPLY")
    write(hb + ".jsonl", t.text_out(), "2026-11-04T09:00:00Z")
    entry("agent:main:main:heartbeat", hb, "2026-11-03T12:00:00.000Z")
    hook = "1c5d2e7f-4a6b-4c8d-9e0f-2a3b4c5d6e7f"
    write(hook + ".jsonl", chat(hook, FRESH % 2, 1, seed=51).text_out(), "2026-11-02T09:00:00Z")
    # A stale generated-transcript name: --fix-missing repairs it to <sessionId>.jsonl.
    entry("agent:main:hook:gmail:inbox", hook, FRESH % 6, sessionFile="2c6e3f8a-5b7c-4d9e-8f1a-3b4c5d6e7f8a.jsonl", label="mail hook")
    # A second hook key on the same session, with its own (long untouched) transcript: when the
    # disk budget evicts it, the shared session id keeps its file, which the unreferenced-artifact
    # sweep then deletes.
    write(hook + "-topic-1.jsonl", chat(hook, STALE % 8, 2, seed=54).text_out(), "2016-03-08T09:00:00Z")
    entry("agent:main:hook:webhook:deploy", hook, "2026-11-04T08:00:00.000Z", sessionFile=hook + "-topic-1.jsonl", label="deploy hook")
    acp = "3d7f4a9b-6c8d-4e0f-9a2b-4c5d6e7f8a9b"
    write(acp + ".jsonl", chat(acp, FRESH % 1, 1, seed=52).text_out(), "2026-11-01T09:00:00Z")
    entry("agent:main:acp:" + acp, acp, FRESH % 1)
    probe = "4e8a5b0c-7d9e-4f1a-8b3c-5d6e7f8a9b0c"
    write(probe + ".jsonl", chat(probe, "2026-10-20T09:00:00.000Z", 1, seed=53).text_out(), "2026-10-20T09:00:00Z")
    entry("agent:main:explicit:model-run-" + probe, probe, "2026-10-20T09:00:00.000Z")

    # 5. Entries whose transcript is gone (--fix-missing), one of them header-only.
    entry("agent:main:whatsapp:direct:+15550009999", "5f9b6c1d-8e0f-4a2b-9c4d-6e7f8a9b0c1d", FRESH % 5, label="Carla (WhatsApp)")
    ho = "6a0c7d2e-9f1a-4b3c-8d5e-7f8a9b0c1d2e"
    write(ho + ".jsonl", T(ho, FRESH % 3, 60).text_out(), "2026-11-03T09:00:00Z")
    entry("agent:main:subagent:" + ho, ho, FRESH % 3)

    # 6. Files nothing points at: orphans, archives, a stale store temp.
    orphan = "7b1d8e3f-0a2b-4c4d-9e6f-8a9b0c1d2e3f"
    write(orphan + ".jsonl", chat(orphan, STALE % 5, 2, image=True, seed=70).text_out(), "2016-03-05T09:00:00Z")
    write(orphan + ".trajectory-path.json", dump({"traceSchema": "openclaw-trajectory-pointer", "schemaVersion": 1, "sessionId": orphan,
          "runtimeFile": "/home/ana/.openclaw/agents/main/sessions/%s.trajectory.jsonl" % orphan}) + "\n", "2016-03-05T09:00:00Z")
    write(main + ".checkpoint.0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl", chat(main, "2016-03-06T08:00:00.000Z", 1, seed=71).text_out(), "2016-03-06T09:00:00Z")
    del_old = "8c2e9f4a-1b3c-4d5e-8f7a-9b0c1d2e3f4a"
    write(del_old + ".jsonl.deleted.2016-02-01T10-00-00.000Z", chat(del_old, STALE % 1, 2, seed=72).text_out(), "2016-02-01T10:00:00Z")
    del_new = "9d3f0a5b-2c4d-4e6f-9a8b-0c1d2e3f4a5b"
    write(del_new + ".jsonl.deleted.2026-10-30T10-00-00.000Z", chat(del_new, "2026-10-29T09:00:00.000Z", 2, seed=73).text_out(), "2026-10-30T10:00:00Z")
    rst_old = "0e4a1b6c-3d5e-4f7a-8b9c-1d2e3f4a5b6c"
    write(rst_old + ".jsonl.reset.2016-01-15T08-30-00.000Z", chat(rst_old, STALE % 1, 1, seed=74).text_out(), "2016-01-15T08:30:00Z")
    write(main + ".jsonl.reset.2026-11-01T07-00-00.000Z", chat(main, "2026-10-31T09:00:00.000Z", 2, image=True, seed=75).text_out(), "2026-11-01T07:00:00Z")
    write("sessions.json.bak.1457000000000", dump({"agent:main:main": {"sessionId": main, "updatedAt": 1457000000000}}), "2016-03-03T10:13:20Z")
    write("sessions.json.4242.1f5b2c7d-4e6f-4a8b-9c0d-2e3f4a5b6c7d.tmp", '{"agent:main:main":{', "2016-03-07T09:00:00Z")

    write("sessions.json", json.dumps(store, indent=2, ensure_ascii=False), "2026-11-06T09:00:00Z")
    with open(os.path.join(ROOT, "mtimes.tsv"), "w") as f:
        f.write("# file under agents/main/sessions/<TAB>mtime (UTC); git does not keep mtimes\n")
        for name in sorted(MTIMES):
            f.write("%s\t%s\n" % (name, MTIMES[name]))


main()
