//! The order as a [`crate::LoaderState`] records it (`order.kind`, `order.distributed`,
//! `order.buffer_pages`, and for a custom order that names itself, `order.custom`), and
//! the check that a state's order is the loader's.

use serde::{Deserialize, Serialize};

/// The order and its parameters (those that decide which samples go where).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OrderState {
    /// `sequential`, `random`, `quasi-random` or `custom`.
    pub(super) kind: String,
    /// Whether the first stint ran in distributed mode (it changes Random's and
    /// QuasiRandom's orders even with one rank).
    pub(super) distributed: bool,
    /// QuasiRandom's buffer in pages (0 for the other orders).
    pub(super) buffer_pages: usize,
    /// A custom order's [`traversal::TraversalOrder::identity`] (a weighted mixture's
    /// weights, epoch length, policy, orders and rank); absent for the built-in orders
    /// and for custom orders that give none, and so in every state of formats 1 to 3
    /// written before mixtures named themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) custom: Option<String>,
}

impl OrderState {
    /// Why a loader whose order is `mine` cannot resume a state saved with `self`; `None`
    /// when it can.
    pub(super) fn refusal(&self, mine: &OrderState) -> Option<String> {
        if self.kind != mine.kind {
            return Some(format!(
                "the state was saved with order {}, this loader uses order {}",
                self.kind, mine.kind
            ));
        }
        if self.custom != mine.custom {
            let name = |c: &Option<String>| c.clone().unwrap_or_else(|| "(unnamed)".into());
            return Some(format!(
                "the state was saved with the custom order {}; this loader's order is {}",
                name(&self.custom),
                name(&mine.custom)
            ));
        }
        if self.buffer_pages != mine.buffer_pages {
            return Some(format!(
                "the state's QuasiRandom buffer is {} pages, this loader's is {}",
                self.buffer_pages, mine.buffer_pages
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(identity: Option<&str>) -> OrderState {
        OrderState {
            kind: "custom".into(),
            distributed: false,
            buffer_pages: 0,
            custom: identity.map(str::to_owned),
        }
    }

    #[test]
    fn a_custom_order_is_refused_under_another_identity() {
        let a = custom(Some("mixture counts=[3, 1]"));
        assert_eq!(a.refusal(&a.clone()), None);
        let reason = a.refusal(&custom(Some("mixture counts=[2, 2]"))).unwrap();
        assert!(
            reason.contains("counts=[3, 1]") && reason.contains("counts=[2, 2]"),
            "{reason}"
        );
        assert!(a.refusal(&custom(None)).unwrap().contains("(unnamed)"));
        // An unnamed custom order resumes an unnamed one, as before.
        assert_eq!(custom(None).refusal(&custom(None)), None);
    }

    #[test]
    fn states_without_the_key_read_and_write_as_before() {
        let json = r#"{"kind":"random","distributed":false,"buffer_pages":0}"#;
        let state: OrderState = serde_json::from_str(json).unwrap();
        assert_eq!(state.custom, None);
        assert_eq!(serde_json::to_string(&state).unwrap(), json);
        let named = custom(Some("x"));
        let back: OrderState =
            serde_json::from_str(&serde_json::to_string(&named).unwrap()).unwrap();
        assert_eq!(back, named);
    }
}
