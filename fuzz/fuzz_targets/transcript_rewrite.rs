//! Edits on fuzzed transcripts: removals (planned by prune-noreply and strip-images, and
//! random ones) go through resolve → streaming apply → validator. Every outcome must be a
//! clean refusal, a validator rejection, or a rewrite that `treegen::check_edits` re-checks
//! independently (untouched lines byte-identical, context = old minus removed); planner edits
//! must never need the validator to stop them. Never a panic.
//!
//! The first byte picks the mode: even → a transcript generated from the remaining bytes
//! (`treegen::transcript`, which reaches deep tree shapes quickly); odd → the remaining bytes
//! are the transcript itself, with edits drawn from a hash of the input.
#![no_main]

#[path = "../../tests/cli/treegen.rs"]
mod treegen;

use clawkeeper::transcript::Index;
use clawkeeper::transcript::rewrite::Edits;
use clawkeeper::transcript::tree::Tree;
use libfuzzer_sys::fuzz_target;
use treegen::{Bytes, Seeded, Source, Verdict};

fn run(text: &[u8], src: &mut impl Source) {
    let index = Index::from_reader(text).expect("reading a slice cannot fail");
    treegen::check_index(text, &index);
    let tree = Tree::build(&index);
    for keep in 0..2 {
        let plan = clawkeeper::noreply::plan(&index, &tree, keep);
        let edits = Edits {
            remove: plan.remove,
            ..Edits::default()
        };
        if !edits.is_empty() {
            let v = treegen::check_edits(text, &index, &tree, &edits);
            assert!(!matches!(v, Verdict::Rejected(_)), "prune-noreply: {v:?}");
        }
    }
    let plan = clawkeeper::images::plan(&index, &tree, src.below(3));
    if plan.refused.is_none() && !plan.replace.is_empty() {
        let mut edits = Edits::default();
        for (e, blocks) in plan.replace {
            let b = blocks
                .into_iter()
                .map(|b| (b, clawkeeper::images::placeholder_block()));
            edits.replace_blocks.insert(e, b.collect());
        }
        let v = treegen::check_edits(text, &index, &tree, &edits);
        assert!(!matches!(v, Verdict::Rejected(_)), "strip-images: {v:?}");
    }
    for _ in 0..4 {
        let edits = Edits {
            remove: treegen::random_removals(src, &index),
            ..Edits::default()
        };
        let _ = treegen::check_edits(text, &index, &tree, &edits);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let mut src = Bytes(rest);
        let text = treegen::transcript(&mut src, 30);
        run(&text, &mut src);
    } else {
        let seed = rest
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        run(rest, &mut Seeded(seed));
    }
});
