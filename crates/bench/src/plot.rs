//! `target/bench/small.svg`: throughput of every row as a horizontal bar, one panel per data
//! set (rates of different data sets differ by orders of magnitude, so each panel has its own
//! scale).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::report::Row;

/// Pixels per bar (bar plus gap) and per panel header.
const ROW_HEIGHT: u32 = 18;
const PANEL_HEADER: u32 = 40;
const WIDTH: u32 = 1100;
/// Approximate width in pixels of one character of the 11 px labels.
const CHAR_WIDTH: f64 = 6.2;
/// Left margin of each panel (the row names sit inside the bars).
const LABEL_WIDTH: u32 = 10;

/// The data set a row belongs to: its `dataset` extra when set, else the first segment of its
/// name that is one of `labels`, else `other`.
pub fn dataset_of(row: &Row, labels: &[&str]) -> String {
    if let Some(dataset) = row.extra.get("dataset").and_then(|v| v.as_str()) {
        return dataset.to_owned();
    }
    row.name
        .split('/')
        .find(|segment| labels.contains(segment))
        .map_or_else(|| "other".to_owned(), str::to_owned)
}

/// Groups rows by data set, keeping each group's rows in measured order.
pub fn groups<'a>(rows: &'a [Row], labels: &[&str]) -> BTreeMap<String, Vec<&'a Row>> {
    let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for row in rows {
        groups.entry(dataset_of(row, labels)).or_default().push(row);
    }
    groups
}

/// `1.23 M/s`, `45.6 k/s`.
fn rate_label(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2} M/s", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1} k/s", rate / 1e3)
    } else {
        format!("{rate:.1}/s")
    }
}

/// Draws `rows` into an SVG file at `path`. Rows without a positive rate are left out.
pub fn write_svg(path: &Path, rows: &[Row], labels: &[&str]) -> Result<(), String> {
    let plotted: Vec<Row> = rows
        .iter()
        .filter(|row| row.samples_per_sec.is_finite() && row.samples_per_sec > 0.0)
        .cloned()
        .collect();
    let groups = groups(&plotted, labels);
    let heights: Vec<u32> = groups
        .values()
        .map(|rows| PANEL_HEADER + ROW_HEIGHT * rows.len() as u32 + 30)
        .collect();
    let total_height = heights.iter().sum::<u32>().max(100);
    let root = SVGBackend::new(path, (WIDTH, total_height)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    if groups.is_empty() {
        root.draw(&Text::new(
            "no rows with a throughput",
            (20, 40),
            ("sans-serif", 16).into_font(),
        ))
        .map_err(|e| err(&e))?;
    }
    let mut rest = root.clone();
    for ((dataset, rows), height) in groups.iter().zip(&heights) {
        let (panel, below) = rest.split_vertically(*height);
        rest = below;
        let max = rows
            .iter()
            .map(|row| row.samples_per_sec)
            .fold(0.0f64, f64::max);
        let n = rows.len() as u32;
        let rows_f = f64::from(n);
        let mut chart = ChartBuilder::on(&panel)
            .caption(
                format!("data set {dataset}: samples/s per configuration"),
                ("sans-serif", 18),
            )
            .margin(6)
            .x_label_area_size(24)
            .y_label_area_size(LABEL_WIDTH)
            .build_cartesian_2d(0.0..max * 1.25, 0.0..rows_f)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_label_formatter(&|x| rate_label(*x))
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| err(&e))?;
        // Row i is drawn in the band [n - 1 - i, n - i): the first row at the top. Each bar
        // carries its row name inside, and its rate after its end.
        let band = |i: usize| rows_f - 1.0 - i as f64;
        let plot_width = chart.plotting_area().dim_in_pixel().0.max(1);
        let x_per_pixel = max * 1.25 / f64::from(plot_width);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, row)| {
                let color = match row.name.split('/').next().unwrap_or("") {
                    "loader" => BLUE,
                    "reader" => RED,
                    "page-cache" => GREEN,
                    "jit" => MAGENTA,
                    _ => CYAN,
                };
                Rectangle::new(
                    [(0.0, band(i) + 0.1), (row.samples_per_sec, band(i) + 0.9)],
                    color.mix(0.25).filled(),
                )
            }))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(rows.iter().enumerate().map(|(i, row)| {
                Text::new(
                    row.name.clone(),
                    (max * 0.005, band(i) + 0.85),
                    ("sans-serif", 11).into_font(),
                )
            }))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(rows.iter().enumerate().map(|(i, row)| {
                // After the bar, or after the name when the bar is shorter than its name.
                let name_end = row.name.len() as f64 * CHAR_WIDTH * x_per_pixel;
                Text::new(
                    format!(" {}", rate_label(row.samples_per_sec)),
                    (row.samples_per_sec.max(name_end), band(i) + 0.85),
                    ("sans-serif", 11).into_font(),
                )
            }))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::report::test_row as row;

    #[test]
    fn rows_group_by_their_dataset_extra_or_a_known_name_segment() {
        let mut tagged = row("loader/x", 1.0);
        tagged.extra.insert("dataset".into(), json!("3k"));
        let rows = [
            tagged,
            row("reader/random/128k/1t", 2.0),
            row("jit/fused", 3.0),
            row("reader/sequential/3k/all", 4.0),
        ];
        let groups = groups(&rows, &["3k", "128k"]);
        let names =
            |key: &str| -> Vec<&str> { groups[key].iter().map(|r| r.name.as_str()).collect() };
        assert_eq!(names("3k"), ["loader/x", "reader/sequential/3k/all"]);
        assert_eq!(names("128k"), ["reader/random/128k/1t"]);
        assert_eq!(names("other"), ["jit/fused"]);
    }

    #[test]
    fn the_svg_names_every_plotted_row_and_its_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small.svg");
        let rows = [
            row("loader/3k/os/random/all/copy", 1.5e6),
            row("loader/3k/proc/quasi-random/1t/cifar-train/interp", 2.0e5),
            row("loader/128k/os/random/all/copy", 3.0e4),
            row("loader/128k/failed", f64::NAN),
        ];
        write_svg(&path, &rows, &["3k", "128k"]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for needle in [
            "data set 3k",
            "data set 128k",
            "loader/3k/os/random/all/copy",
            "loader/3k/proc/quasi-random/1t/cifar-train/interp",
            " 1.50 M/s",
            " 30.0 k/s",
        ] {
            assert!(svg.contains(needle), "`{needle}` not in the SVG");
        }
        assert!(!svg.contains("loader/128k/failed"));
    }
}
