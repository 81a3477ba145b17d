//! The one integration-test binary: every topic is a module here.

mod compact;
mod compact_successor;
mod generator;
mod model;
mod transcript;
mod transcript_safety;
mod util;
