//! A memoised walk up a chain of entries (parent links, or any other "next entry" relation):
//! every entry passed remembers its answer, so a run of many walks over shared chains visits
//! each entry once instead of once per walk, which keeps a hostile file with a long chain
//! (and an entry hanging off each link) linear rather than quadratic.

/// A memoised walk's state at one entry.
#[derive(Debug, Clone, Copy)]
pub enum Walk<T> {
    Unvisited,
    Visiting,
    Done(T),
}

impl<T: Copy> Walk<T> {
    /// The answer, once walked.
    pub fn done(&self) -> Option<T> {
        match self {
            Walk::Done(a) => Some(*a),
            _ => None,
        }
    }
}

/// One step of a memoised walk.
pub enum Step<T> {
    /// The answer at this entry.
    Answer(T),
    /// The entry to look at next.
    Next(usize),
}

/// Follow `step` (an answer, or the next entry to look at) from `start`, remembering the
/// answer for every entry passed so that each entry is walked once per run; a cycle answers
/// `on_cycle`. Every entry of a chain gets the answer its end gives.
pub fn follow<T: Copy>(
    memo: &mut [Walk<T>],
    start: usize,
    on_cycle: T,
    step: impl FnMut(usize) -> Step<T>,
) -> T {
    follow_folded(memo, start, on_cycle, step, |_, answer| answer)
}

/// [`follow`] for answers that depend on the entries passed: an entry that steps on to the
/// next gets `fold(entry, answer of the next)` (say, the largest position walked through
/// from it), an entry that answers gets its own answer, and a cycle gives `on_cycle` to the
/// entry that closes it.
pub fn follow_folded<T: Copy>(
    memo: &mut [Walk<T>],
    start: usize,
    on_cycle: T,
    mut step: impl FnMut(usize) -> Step<T>,
    mut fold: impl FnMut(usize, T) -> T,
) -> T {
    let mut chain = Vec::new();
    let mut cur = start;
    let mut answer = loop {
        match memo[cur] {
            Walk::Done(a) => break a,
            Walk::Visiting => break on_cycle,
            Walk::Unvisited => {}
        }
        memo[cur] = Walk::Visiting;
        match step(cur) {
            Step::Answer(a) => {
                memo[cur] = Walk::Done(a);
                break a;
            }
            Step::Next(next) => {
                chain.push(cur);
                cur = next;
            }
        }
    };
    for c in chain.into_iter().rev() {
        answer = fold(c, answer);
        memo[c] = Walk::Done(answer);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `next[i]`: the entry after `i` (`None`: `i` answers with itself).
    fn walk_all(next: &[Option<usize>]) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
        let n = next.len();
        let mut ends = vec![Walk::Unvisited; n];
        let mut maxes = vec![Walk::Unvisited; n];
        let step = |i: usize| match next[i] {
            Some(k) => Step::Next(k),
            None => Step::Answer(Some(i)),
        };
        let ends = (0..n).map(|i| follow(&mut ends, i, None, step)).collect();
        let maxes = (0..n)
            .map(|i| follow_folded(&mut maxes, i, None, step, |c, a| a.map(|m| m.max(c))))
            .collect();
        (ends, maxes)
    }

    #[test]
    fn every_entry_gets_its_chains_end_and_a_fold_of_what_it_passes() {
        // 3 -> 0 -> 2 (end), 1 -> 0, 4 -> 5 -> 4 (a cycle), 6 -> 4.
        let next = [Some(2), Some(0), None, Some(0), Some(5), Some(4), Some(4)];
        let (ends, maxes) = walk_all(&next);
        assert_eq!(ends, [Some(2), Some(2), Some(2), Some(2), None, None, None]);
        assert_eq!(
            maxes,
            [Some(2), Some(2), Some(2), Some(3), None, None, None]
        );
    }

    #[test]
    fn a_long_chain_is_walked_once() {
        let n: usize = 200_000;
        let next: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
        let mut steps = 0usize;
        let mut memo = vec![Walk::Unvisited; n];
        for i in (0..n).rev().chain(0..n) {
            follow_folded(
                &mut memo,
                i,
                None,
                |c| {
                    steps += 1;
                    match next[c] {
                        Some(k) => Step::Next(k),
                        None => Step::Answer(Some(c)),
                    }
                },
                |c, a: Option<usize>| a.map(|m| m.max(c)),
            );
        }
        assert_eq!(steps, n);
        assert_eq!(memo[0].done(), Some(Some(0)));
        assert_eq!(memo[n - 1].done(), Some(Some(n - 1)));
    }
}
