//! Where in the recipe text a problem is: line and column of a byte offset
//! or of a dotted path, for messages that point at what to fix.

/// A line and column (both from 1) in the recipe file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// Line and column (from 1, column counted in characters) of a byte offset.
pub fn location(text: &str, offset: usize) -> Location {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line,
        column: before[line_start..].chars().count() + 1,
    }
}

/// Where a dotted path (`storage.arrays[1].mount`) is written in the recipe
/// text, so that problems found after parsing still point at a line.
pub fn locate(text: &str, dotted: &str) -> Option<Location> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut span = root.span();
    let root = toml::de::DeValue::Table(root.into_inner());
    let mut here = &root;
    for segment in dotted.split('.') {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        let Some(next) = here.get(key) else { break };
        if !next.span().is_empty() {
            span = next.span();
        }
        here = next.get_ref();
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let Some(next) = index.parse::<usize>().ok().and_then(|i| here.get(i)) else {
                return Some(location(text, span.start));
            };
            if !next.span().is_empty() {
                span = next.span();
            }
            here = next.get_ref();
        }
    }
    Some(location(text, span.start))
}
