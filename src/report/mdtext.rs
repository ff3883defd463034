//! Markdown escaping for text from outside, shared by the Markdown report and the soak
//! chart's Markdown section.

/// Escape text that comes from outside (host, target, profile and drive names) for Markdown:
/// every character CommonMark could read as markup mid-line (emphasis, code, links and images,
/// raw HTML, entities, table pipes, headings' closing `#`) is backslash-escaped, so a name like
/// `<img src=x>` or `*a*|b` reads back literally. Line breaks become spaces, so the text stays in
/// its table cell or heading; other control characters become U+FFFD.
pub(super) fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~' | '&' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
