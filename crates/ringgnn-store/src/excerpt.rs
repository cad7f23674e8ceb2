//! What an error may show of an input's content: the one owner of excerpts.
//!
//! An error about a file the user named (`ringgnn convert edges.tsv`) may quote a short excerpt
//! of the offending line, [`EXCERPT_CHARS`] characters at most, so that the user sees what is
//! wrong. An error about a file that a dataset description named (a GraphBolt `metadata.yaml`'s
//! `path:`, a file an OGB folder's layout names) quotes nothing of it, only its name and the line
//! or entry: a downloaded dataset may hold a link to any file of the user's (`/etc/shadow`, an
//! API key), and its content must not reach a log through an error message. Numbers a reader
//! parsed as node ids are data, not text, and are named either way (`node id 7 is >= 5`).

/// Characters of an input line an error quotes at most (an ellipsis marks the cut).
pub const EXCERPT_CHARS: usize = 60;

/// Whether errors about an input file may quote its content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Excerpts {
    /// A file the user named: errors quote an [`excerpt`] of the offending line.
    #[default]
    Quote,
    /// A file a dataset description named: errors name the file and the line, never its content.
    Withhold,
}

impl Excerpts {
    /// The [`excerpt`] of `bytes` an error may show, or None when it shows nothing of them.
    pub fn show(self, bytes: &[u8]) -> Option<String> {
        match self {
            Excerpts::Quote => Some(excerpt(bytes)),
            Excerpts::Withhold => None,
        }
    }
}

/// `bytes` for an error message: lossy UTF-8, control characters escaped, at most
/// [`EXCERPT_CHARS`] characters, `...` appended when cut.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut shown: String = text
        .chars()
        .take(EXCERPT_CHARS)
        .flat_map(|c| {
            let esc: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            esc
        })
        .collect();
    if text.chars().nth(EXCERPT_CHARS).is_some() {
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_and_escaped() {
        assert_eq!(excerpt(b"a\tb"), "a\\tb");
        let long = "x".repeat(EXCERPT_CHARS + 1);
        assert_eq!(
            excerpt(long.as_bytes()),
            format!("{}...", &long[..EXCERPT_CHARS])
        );
        assert_eq!(
            excerpt(&long.as_bytes()[..EXCERPT_CHARS]),
            long[..EXCERPT_CHARS]
        );
        assert_eq!(Excerpts::Withhold.show(b"secret"), None);
        assert_eq!(Excerpts::Quote.show(b"abc"), Some("abc".into()));
    }
}
