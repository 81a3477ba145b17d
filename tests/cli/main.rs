//! The one integration-test binary: every topic is a module here.

mod generator;
mod model;
mod transcript;
mod transcript_safety;
mod transcript_store;
mod util;
