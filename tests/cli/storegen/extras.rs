//! Files of a case that no entry points at: orphans, archives of every reason, store temps,
//! unknown names, symlinks, nested dirs and prompt blobs; and the size the disk budget sees.

use super::store::{Gen, Presence};
use super::transcript::{self, Shape};
use super::{DAY, Node, ROOT, archive_ts, replace_bytes, sha256_hex};

impl Gen {
    /// Files no entry points at: orphans, archives, temps, unknown names, links, blobs.
    pub(super) fn extras(&mut self) {
        let sdir = self.sdir.clone();
        let store = self.store_name.clone();
        for _ in 0..self.rng.range(0, 4) {
            let id = self.rng.uuid();
            let rel = format!("{sdir}/{id}.jsonl");
            let presence = if self.rng.chance(0.2) {
                Presence::Messageless
            } else {
                Presence::Full
            };
            self.transcript_file(&rel, &id, presence);
            if self.rng.chance(0.4) {
                self.trajectory(&rel, &id);
            }
        }
        for _ in 0..self.rng.range(0, 2) {
            let (sid, cp) = (self.rng.uuid(), self.rng.uuid());
            let age = self.age();
            self.file(
                &format!("{sdir}/{sid}.checkpoint.{cp}.jsonl"),
                transcript::header_only(&sid, self.now - age).into_bytes(),
                age,
            );
        }
        for _ in 0..self.rng.range(0, 7) {
            let id = self.rng.uuid();
            let ts_age = self.age();
            let ts = archive_ts(self.now - ts_age);
            let name = match self.rng.below(10) {
                0..=2 => format!("{id}.jsonl.deleted.{ts}"),
                3..=4 => format!("{id}.jsonl.reset.{ts}"),
                5 => format!("{id}-topic-7.jsonl.deleted.{ts}"),
                6 => format!("sessions.json.bak.{}", self.now - ts_age),
                7 if self.rng.chance(0.3) => format!("{store}.bak.{}", self.now - ts_age),
                7 => format!("{id}.jsonl.bak.{ts}"),
                8 => format!("{id}.jsonl.deleted.{ts}.zst"),
                _ => match self.rng.below(3) {
                    0 => format!("{id}.jsonl.deleted.{}Z", &ts[..19]),
                    1 => {
                        // Dates JavaScript's Date.parse rolls over (day 29-31 of a short
                        // month, hour 24) or rejects (day 32, month 13, minute 60).
                        let odd = *self.rng.pick(&[
                            "2026-02-30T10-00-00.000Z",
                            "2026-04-31T10-00-00.000Z",
                            "2026-01-01T24-00-00.000Z",
                            "2026-02-32T10-00-00.000Z",
                            "2026-13-01T10-00-00.000Z",
                            "2026-01-01T10-60-00.000Z",
                        ]);
                        let reason = *self.rng.pick(&["reset", "deleted"]);
                        format!("{id}.jsonl.{reason}.{odd}")
                    }
                    _ => format!("{id}.jsonl.deleted.not-a-time"),
                },
            };
            let start = self.now - ts_age - DAY;
            let text = transcript::transcript(&mut self.rng, &id, start, Shape::default());
            let age = self.age();
            self.file(&format!("{sdir}/{name}"), text.into_bytes(), age);
        }
        for _ in 0..self.rng.range(0, 3) {
            let u = self.rng.uuid();
            let name = match self.rng.below(4) {
                0 => format!("{store}.{}.{u}.tmp", self.rng.range(100, 99999)),
                1 => format!("{store}.{u}.tmp"),
                2 => format!("{store}.{}.tmp", u.to_uppercase()),
                _ => format!("{store}.tmp"),
            };
            let age = self.age();
            self.file(&format!("{sdir}/{name}"), b"{\"partial\":".to_vec(), age);
        }
        for _ in 0..self.rng.range(0, 3) {
            let u = self.rng.uuid();
            let name = match self.rng.below(5) {
                0 => "notes.txt".to_string(),
                1 => format!("{u}.jsonl.lock"),
                2 => format!("{u}.jsonl.bak"),
                3 => format!("{store}.lock"),
                _ => format!("{u}.txt"),
            };
            let age = self.age();
            let pid = self.rng.range(2, 9999);
            self.file(
                &format!("{sdir}/{name}"),
                format!("{{\"pid\":{pid}}}\n").into_bytes(),
                age,
            );
        }
        if self.rng.chance(0.3) {
            let u = self.rng.uuid();
            match self.rng.below(3) {
                0 => {
                    let age = self.age();
                    self.file(
                        "elsewhere/target.jsonl",
                        transcript::header_only(&u, self.now).into_bytes(),
                        age,
                    );
                    self.symlink(
                        &format!("{sdir}/{u}.jsonl"),
                        &format!("{ROOT}/elsewhere/target.jsonl"),
                    );
                }
                1 => self.symlink(&format!("{sdir}/{u}.jsonl"), "does-not-exist.jsonl"),
                _ => self.symlink(
                    &format!("{sdir}/{u}.trajectory.jsonl"),
                    "../../../../elsewhere",
                ),
            }
        }
        if self.rng.chance(0.2) {
            let id = self.rng.uuid();
            self.transcript_file(&format!("{sdir}/sub/{id}.jsonl"), &id, Presence::Full);
        }
        if self.rng.chance(0.25) {
            let text = format!("orphan prompt {}\n", self.rng.hex(16)).repeat(40);
            let hash = sha256_hex(text.as_bytes());
            let age = self.age();
            let dir = format!("{sdir}/skills-prompts/sha256/{}", &hash[..2]);
            let name = if self.rng.chance(0.7) {
                format!("{hash}.txt")
            } else {
                format!(
                    "{hash}.txt.{}.{}.tmp",
                    self.rng.range(10, 9999),
                    self.rng.uuid()
                )
            };
            self.file(&format!("{dir}/{name}"), text.into_bytes(), age);
        }
        if self.rng.chance(0.1) {
            self.nodes.push((format!("{sdir}/empty-dir"), Node::Dir));
        }
    }

    /// Approximate bytes the disk budget counts (top-level files and prompt blobs).
    pub(super) fn budget(&mut self) -> i64 {
        let prefix = format!("{}/", self.sdir);
        self.nodes
            .iter()
            .filter_map(|(p, n)| match n {
                Node::File { content, .. } => {
                    let rest = p.strip_prefix(&prefix)?;
                    let top = !rest.contains('/') || rest.starts_with("skills-prompts/");
                    top.then(|| {
                        replace_bytes(content, ROOT.as_bytes(), b"/tmp/.tmpXXXXXX/r").len() as i64
                    })
                }
                _ => None,
            })
            .sum()
    }
}
