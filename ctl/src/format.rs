//! Human-readable formatting for the table output: aligned tables, key/value
//! lists, sizes, latencies, durations and percentages.
//!
//! Thread: the CLI's main thread (pure functions).

/// How a column's cells are padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left.
    Right,
}

/// A table with a header row; column widths are computed from the widest
/// cell (in characters, so `µs` counts as two).
#[derive(Debug)]
pub(crate) struct Table {
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers and alignments.
    pub(crate) fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            aligns: columns.iter().map(|&(_, a)| a).collect(),
            rows: vec![columns.iter().map(|&(h, _)| h.to_owned()).collect()],
        }
    }

    /// Appends a row; it must have one cell per column.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.aligns.len(), "one cell per column");
        self.rows.push(cells);
    }

    /// The table, one line per row, each ending in a newline; without the
    /// header line unless `headers` (`--no-headers`). The column widths are
    /// the same either way.
    pub(crate) fn render(&self, headers: bool) -> String {
        let text = render_rows(&self.rows, &self.aligns);
        if headers {
            text
        } else {
            text.split_once('\n')
                .map_or_else(String::new, |(_, rows)| rows.to_owned())
        }
    }
}

/// A two-column list of `key  value` lines with the values aligned.
pub(crate) fn key_values(pairs: &[(&str, String)]) -> String {
    let rows: Vec<Vec<String>> = pairs
        .iter()
        .map(|(k, v)| vec![(*k).to_owned(), v.clone()])
        .collect();
    render_rows(&rows, &[Align::Left, Align::Left])
}

/// Columns separated by two spaces; no trailing spaces.
fn render_rows(rows: &[Vec<String>], aligns: &[Align]) -> String {
    let mut widths = vec![0; aligns.len()];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, ((cell, &w), &align)) in row.iter().zip(&widths).zip(aligns).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            match align {
                Align::Left => line.push_str(&format!("{cell:<w$}")),
                Align::Right => line.push_str(&format!("{cell:>w$}")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Bytes in binary units with one decimal (`64.0 MiB`, `1.0 GiB`); below
/// 1 KiB, plain bytes (`512 B`).
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Move up while the value would print as 1024.0 or more.
    while unit + 1 < UNITS.len() && (value * 10.0).round() >= 10240.0 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Values at or above this mean "no limit" (the API's `u64::MAX` or
/// `i64::MAX` sentinels).
const UNLIMITED: u64 = i64::MAX as u64;

/// A size limit: [`human_size`], or `unlimited` for the sentinels.
pub(crate) fn size_limit(bytes: u64) -> String {
    if bytes >= UNLIMITED {
        "unlimited".to_owned()
    } else {
        human_size(bytes)
    }
}

/// A count limit: the number, or `unlimited` for the sentinels.
pub(crate) fn count_limit(n: u64) -> String {
    if n >= UNLIMITED {
        "unlimited".to_owned()
    } else {
        n.to_string()
    }
}

/// A latency in microseconds with its unit, three significant digits or
/// more: `850 ns`, `12.3 µs`, `1.25 ms`, `2.50 s`.
pub(crate) fn human_latency(us: f64) -> String {
    let (value, unit) = if us < 1.0 {
        (us * 1000.0, "ns")
    } else if us < 1000.0 {
        (us, "µs")
    } else if us < 1_000_000.0 {
        (us / 1000.0, "ms")
    } else {
        (us / 1_000_000.0, "s")
    };
    let decimals = if unit == "ns" || value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

/// Nanoseconds as microseconds with two decimals (`12.35`).
pub(crate) fn micros(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// A duration in nanoseconds: seconds with three decimals below a minute
/// (`12.345 s`), else days, hours, minutes and seconds (`1h 02m 03s`).
pub(crate) fn human_duration(ns: u64) -> String {
    const NS_PER_S: u64 = 1_000_000_000;
    if ns < 60 * NS_PER_S {
        return format!("{:.3} s", ns as f64 / NS_PER_S as f64);
    }
    let s = ns / NS_PER_S;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h) {
        (0, 0) => format!("{m}m {s:02}s"),
        (0, _) => format!("{h}h {m:02}m {s:02}s"),
        _ => format!("{d}d {h:02}h {m:02}m {s:02}s"),
    }
}

/// `part` as a percentage of `whole` with one decimal, `-` when `whole` is 0.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}", part as f64 * 100.0 / whole as f64)
    }
}

/// `text()` when `shown`, else `-` (a latency of an operation that never
/// ran, say).
pub(crate) fn dash_unless(shown: bool, text: impl FnOnce() -> String) -> String {
    if shown { text() } else { "-".to_owned() }
}

/// `yes` or `no`.
pub(crate) fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases = [
            (0, "0 B"),
            (512, "512 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (64 << 20, "64.0 MiB"),
            (1 << 30, "1.0 GiB"),
            // Just below 1 MiB rounds to 1024.0 KiB, which reads as 1.0 MiB.
            ((1 << 20) - 1, "1.0 MiB"),
            (3 << 40, "3.0 TiB"),
            (u64::MAX, "16.0 EiB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(human_size(bytes), text, "{bytes}");
        }
    }

    #[test]
    fn latencies_in_microseconds() {
        assert_eq!(micros(0), "0.00");
        assert_eq!(micros(12_345), "12.35");
        assert_eq!(micros(1_500_000), "1500.00");
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(0), "0.000 s");
        assert_eq!(human_duration(12_345_678_901), "12.346 s");
        assert_eq!(human_duration(90_000_000_000), "1m 30s");
        assert_eq!(human_duration(3_723_000_000_000), "1h 02m 03s");
        assert_eq!(human_duration(93_784_000_000_000), "1d 02h 03m 04s");
    }

    #[test]
    fn limits_print_unlimited_for_the_sentinels() {
        assert_eq!(size_limit(u64::MAX), "unlimited");
        assert_eq!(size_limit(i64::MAX as u64), "unlimited");
        assert_eq!(size_limit(1 << 21), "2.0 MiB");
        assert_eq!(count_limit(u64::MAX), "unlimited");
        assert_eq!(count_limit(128), "128");
    }

    #[test]
    fn latencies_with_units() {
        assert_eq!(human_latency(0.0), "0 ns");
        assert_eq!(human_latency(0.85), "850 ns");
        assert_eq!(human_latency(1.5), "1.50 µs");
        assert_eq!(human_latency(12.34), "12.3 µs");
        assert_eq!(human_latency(250.1), "250 µs");
        assert_eq!(human_latency(1250.0), "1.25 ms");
        assert_eq!(human_latency(2_500_000.0), "2.50 s");
    }

    #[test]
    fn percentages() {
        assert_eq!(percent(1, 3), "33.3");
        assert_eq!(percent(0, 0), "-");
    }

    #[test]
    fn table_columns_are_aligned() {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("AVG µs", Align::Right),
            ("NOTE", Align::Left),
        ]);
        t.row(vec!["m0".into(), "1.50".into(), "x".into()]);
        t.row(vec!["long-name".into(), "1234.00".into(), String::new()]);
        assert_eq!(
            t.render(true),
            "NAME        AVG µs  NOTE\n\
             m0            1.50  x\n\
             long-name  1234.00\n"
        );
        assert_eq!(
            t.render(false),
            "m0            1.50  x\n\
             long-name  1234.00\n",
            "without headers: the rows, as aligned as with them"
        );
    }

    #[test]
    fn table_with_only_a_header() {
        let t = Table::new(&[("NAME", Align::Left), ("SIZE", Align::Right)]);
        assert_eq!(t.render(true), "NAME  SIZE\n");
        assert_eq!(t.render(false), "");
    }

    #[test]
    #[should_panic(expected = "one cell per column")]
    fn rows_must_fill_every_column() {
        Table::new(&[("A", Align::Left), ("B", Align::Left)]).row(vec!["a".into()]);
    }

    #[test]
    fn key_value_lists_align_values() {
        let text = key_values(&[("name", "m0".into()), ("block size", "512".into())]);
        assert_eq!(text, "name        m0\nblock size  512\n");
    }
}
