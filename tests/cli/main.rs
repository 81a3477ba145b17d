//! The one integration-test binary: every topic is a module here.

mod compact;
mod generator;
mod inspect;
mod model;
mod transcript;
mod transcript_safety;
mod util;
