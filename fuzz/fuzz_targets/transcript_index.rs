//! The index pass on arbitrary bytes: it never panics, its lines tile the input exactly
//! (only the last line may lack a newline, every entry points back at its line), and the
//! tree, context and pairing built on it, and both planners, terminate without panicking
//! whatever the parent links (cycles, self-parents, dangling ids) or line contents.
#![no_main]

#[path = "../../tests/cli/treegen.rs"]
mod treegen;

use clawkeeper::transcript::Index;
use clawkeeper::transcript::probe;
use clawkeeper::transcript::tree::{self, Tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let index = Index::from_reader(data).expect("reading a slice cannot fail");
    treegen::check_index(data, &index);
    for line in data.split(|&b| b == b'\n') {
        let _ = probe::probe_line(line);
    }
    let tree = Tree::build(&index);
    let (ctx, _) = tree::active_context(&index, &tree);
    assert!(ctx.len() <= index.entries.len() + 1);
    let _ = tree.unreachable(&index);
    let _ = clawkeeper::noreply::plan(&index, &tree, 1);
    let _ = clawkeeper::images::plan(&index, &tree, 1);
});
