//! The one integration-test binary: runs `clawkeeper` (and, where available, the reference
//! OpenClaw) against stores and transcripts built in temp dirs. Every topic is a module here.

mod cleanup;
mod compact;
mod compact_successor;
mod generator;
mod model;
mod transcript;
mod transcript_safety;
mod transcript_store;
mod util;
