//! The one integration-test binary: `util` holds the shared helpers, every other module one
//! topic.

mod demo;
mod parity;
mod storegen;
mod util;
