//! The one integration-test binary: runs `clawkeeper` (and, where available, the reference
//! OpenClaw) against stores and transcripts built in temp dirs. `util` holds the shared
//! helpers, every other module one topic.

mod cleanup;
mod compact;
mod compact_successor;
mod demo;
mod generator;
mod model;
mod parity;
mod storegen;
mod transcript;
mod transcript_safety;
mod transcript_store;
mod util;
