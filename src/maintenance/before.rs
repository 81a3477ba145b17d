//! The store as a cleanup plan found it, without a second copy of it: the plan works on the
//! loaded store itself, and what its steps remove or repair is kept aside.

use std::collections::HashMap;

use serde_json::Value;

use super::entries::Repair;
use crate::store::Store;

/// The entries of a store as it was loaded, in its order: for the dry-run table, and for what
/// the plan looks up of the entries it removes. A kept entry is read from the planned store, a
/// removed one from what its step removed, and an entry that `--fix-missing` repaired as it
/// was before the repair.
#[derive(Debug, Clone, Default)]
pub struct Before {
    order: Vec<String>,
    kept: Store,
    removed: HashMap<String, Value>,
    unrepaired: HashMap<String, Value>,
}

impl Before {
    /// `order`: the keys as loaded; `kept`: the planned store; `removed`: every entry a step
    /// removed, as the step found it; `repairs`: the `sessionFile` repairs the plan made.
    pub fn new(
        order: Vec<String>,
        kept: Store,
        removed: impl IntoIterator<Item = (String, Value)>,
        repairs: &[Repair],
    ) -> Before {
        let removed: HashMap<String, Value> = removed.into_iter().collect();
        let unrepaired = repairs
            .iter()
            .filter_map(|r| {
                let now = removed.get(&r.key).or_else(|| kept.get(&r.key))?;
                Some((r.key.clone(), unrepaired(now, r)))
            })
            .collect();
        Before {
            order,
            kept,
            removed,
            unrepaired,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The entry `key` as it was loaded.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.unrepaired
            .get(key)
            .or_else(|| self.removed.get(key))
            .or_else(|| self.kept.get(key))
    }

    /// Every entry as it was loaded, in the store's order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.order.iter().filter_map(|k| Some((k, self.get(k)?)))
    }
}

/// `entry` as it was before `repair` set its `sessionFile` (a repair sets a string over a
/// string, or adds the member last).
pub fn unrepaired(entry: &Value, repair: &Repair) -> Value {
    let mut entry = entry.clone();
    if let Value::Object(members) = &mut entry {
        match &repair.previous {
            Some(previous) => {
                members.insert("sessionFile".into(), Value::String(previous.clone()));
            }
            None => {
                members.shift_remove("sessionFile");
            }
        }
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The entries come back as loaded, in order, whether kept, removed, repaired or both.
    #[test]
    fn entries_are_read_as_they_were_loaded() {
        let loaded: Store = serde_json::from_value(json!({
            "a": {"sessionId": "s1", "sessionFile": "old.jsonl", "updatedAt": 1},
            "b": {"sessionId": "s2", "updatedAt": 2},
            "c": {"sessionId": "s3", "updatedAt": 3},
            "d": {"sessionId": "s4", "updatedAt": 4},
        }))
        .unwrap();
        let mut planned = loaded.clone();
        let repair = |key: &str, previous: Option<&str>| Repair {
            key: key.into(),
            session_id: String::new(),
            previous: previous.map(Into::into),
            new: "new.jsonl".into(),
        };
        let repairs = [repair("a", Some("old.jsonl")), repair("b", None)];
        for r in &repairs {
            planned[&r.key]["sessionFile"] = json!(r.new);
        }
        let removed = vec![
            ("b".to_owned(), planned.shift_remove("b").unwrap()),
            ("c".to_owned(), planned.shift_remove("c").unwrap()),
        ];
        let order: Vec<String> = loaded.keys().cloned().collect();
        let before = Before::new(order, planned, removed, &repairs);
        assert_eq!(before.len(), 4);
        let seen: Vec<(&String, &Value)> = before.iter().collect();
        let want: Vec<(&String, &Value)> = loaded.iter().collect();
        assert_eq!(seen, want);
        assert_eq!(
            serde_json::to_string(before.get("a").unwrap()).unwrap(),
            serde_json::to_string(&loaded["a"]).unwrap(),
            "members keep their order"
        );
        assert!(before.get("e").is_none());
    }
}
