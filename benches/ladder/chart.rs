//! The ladder as a PNG bar chart: best warm us/frame per step, floors drawn as lines.

use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use crate::floors::Floors;

/// Draws the chart for one cluster size.
pub fn draw(
    path: &Path,
    size: usize,
    rows: &[Value],
    fl: &Floors,
    kernel_us: Option<f64>,
) -> Result<(), String> {
    // One font search for the whole crate; charts without a font are refused, not unlabelled.
    cluda::plot::register_font().map_err(|e| e.to_string())?;
    let bars: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r["step"] != "kernel")
        .map(|r| {
            (
                format!(
                    "{}{}",
                    r["step"].as_str().unwrap_or("?"),
                    if r["precision"] == "f32" { " f32" } else { "" }
                ),
                r["warm_us"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    let ymax = bars.iter().map(|b| b.1).fold(fl.upload_us(), f64::max) * 1.15;
    let root = BitMapBackend::new(path, (1200, 700)).into_drawing_area();
    let e = |x: &dyn std::fmt::Display| x.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("cluda ladder {size}x{size}: best warm us/frame (log scale)"),
            ("sans-serif", 26),
        )
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0..bars.len().saturating_sub(1)).into_segmented(),
            (0.5f64..ymax).log_scale(),
        )
        .map_err(|x| e(&x))?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len())
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("us per frame")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.5),
                    (SegmentValue::Exact(i + 1), b.1.max(0.5)),
                ],
                BLUE.mix(0.6).filled(),
            );
            r.set_margin(0, 0, 12, 12);
            r
        }))
        .map_err(|x| e(&x))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("{:.1}", b.1),
                (SegmentValue::CenterOf(i), b.1 * 1.08),
                ("sans-serif", 14),
            )
        }))
        .map_err(|x| e(&x))?;
    let mut lines = vec![(fl.upload_us(), "upload floor", RED)];
    if let Some(k) = kernel_us {
        lines.push((k, "kernel", GREEN));
    }
    let cpf = rows
        .iter()
        .find(|r| r["step"] == "opt1")
        .and_then(|r| r["clusters_per_frame"].as_f64())
        .unwrap_or(0.0);
    let rb = rows
        .first()
        .and_then(|r| r["record_bytes"].as_f64())
        .unwrap_or(0.0);
    lines.push((
        fl.download_us(cpf * rb + 8.0),
        "download floor (clusters found)",
        MAGENTA,
    ));
    for (y, name, color) in lines {
        chart
            .draw_series(LineSeries::new(
                vec![(SegmentValue::Exact(0), y), (SegmentValue::Last, y)],
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label(format!("{name} {y:.2} us"))
            .legend(move |(x, yy)| {
                PathElement::new(vec![(x, yy), (x + 20, yy)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
