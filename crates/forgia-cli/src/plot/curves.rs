//! A training run in one picture: a title naming the job and its settings, the loss panel
//! (every step's batch loss, a smoothed curve and each epoch's mean as a dot) and the metric panel (the
//! test or validation metric after each epoch), with numbered axes, axis labels and legends.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{render_png, text_of, Area, FAMILY};

/// The picture's size in pixels.
pub(crate) const SIZE: (u32, u32) = (1000, 760);
/// Height of the title band at the top, in pixels.
pub(crate) const TITLE_HEIGHT: u32 = 50;

const RAW: RGBColor = RGBColor(170, 200, 235);
const SMOOTH: RGBColor = RGBColor(30, 90, 200);
const EPOCH: RGBColor = RGBColor(200, 60, 20);
const METRIC: RGBColor = RGBColor(20, 130, 60);

/// One finished epoch as the plot needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EpochPoint {
    /// The optimizer step the epoch ended at (its x position on the loss panel).
    pub(crate) step: u64,
    /// 1-based epoch number.
    pub(crate) epoch: u64,
    /// Mean training loss over the epoch.
    pub(crate) train_loss: f64,
    /// The job's metric after the epoch.
    pub(crate) metric: f64,
}

/// Everything drawn in a run's picture.
pub(crate) struct RunCurves<'a> {
    /// The title, e.g. `mnist: Adam lr 0.001, batch 64, 10 epochs, seed 0`.
    pub(crate) title: &'a str,
    /// `(step, batch loss)` of every optimizer step, 1-based steps.
    pub(crate) steps: &'a [(u64, f32)],
    /// The finished epochs.
    pub(crate) epochs: &'a [EpochPoint],
    /// The metric's axis label, e.g. `test accuracy (%)`.
    pub(crate) metric_label: &'a str,
    /// Whether the metric is a percentage (its axis then ends at 100).
    pub(crate) percent: bool,
}

/// Writes the run's picture to `path` as a PNG.
///
/// # Errors
/// A message when drawing or writing fails.
pub(crate) fn write(path: &Path, run: &RunCurves<'_>) -> Result<(), String> {
    render_png(path, SIZE, |root| draw(root, run))
}

/// Draws the run's picture on `root` (a white area of [`SIZE`]).
///
/// # Errors
/// A message when a drawing step fails.
pub(crate) fn draw(root: &Area<'_>, run: &RunCurves<'_>) -> Result<(), String> {
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    let style = TextStyle::from((FAMILY, 22).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    let (w, h) = title.dim_in_pixel();
    title.draw_text(run.title, &style, (w as i32 / 2, h as i32 / 2)).map_err(text_of)?;
    let (loss_area, metric_area) = body.split_vertically(body.dim_in_pixel().1 * 58 / 100);
    draw_loss(&loss_area.margin(5, 10, 10, 25), run)?;
    draw_metric(&metric_area.margin(10, 10, 10, 25), run)
}

/// The smoothing window, in steps, for `n` steps: about a twentieth of the run (1, no
/// smoothing, for runs under 40 steps).
fn window(n: usize) -> usize {
    (n / 20).clamp(1, 200)
}

/// The centered moving average of `values` over `window` steps (fewer at the ends), which,
/// unlike an exponential average, does not lag behind the curve.
pub(crate) fn smoothed(values: &[f32], window: usize) -> Vec<f64> {
    let half = window / 2;
    let mut prefix = Vec::with_capacity(values.len() + 1);
    prefix.push(0.0f64);
    for &v in values {
        prefix.push(prefix[prefix.len() - 1] + v as f64);
    }
    (0..values.len())
        .map(|i| {
            let (lo, hi) = (i.saturating_sub(half), (i + half + 1).min(values.len()));
            (prefix[hi] - prefix[lo]) / (hi - lo) as f64
        })
        .collect()
}

fn draw_loss(area: &Area<'_>, run: &RunCurves<'_>) -> Result<(), String> {
    let first = run.steps.first().map_or(0, |s| s.0);
    let last = run.steps.last().map_or(1, |s| s.0).max(first + 1);
    let finite = run.steps.iter().map(|s| s.1 as f64).filter(|v| v.is_finite());
    let top = finite.fold(1e-6, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption("training loss", (FAMILY, 18))
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(first..last, 0.0..top)
        .map_err(text_of)?;
    chart
        .configure_mesh()
        .x_desc("optimizer step")
        .y_desc("cross-entropy loss")
        .x_labels(((last - first) as usize + 1).min(12))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(246, 246, 246))
        .draw()
        .map_err(text_of)?;
    let raw: Vec<(u64, f64)> = run.steps.iter().map(|&(s, l)| (s, l as f64)).collect();
    chart.draw_series(LineSeries::new(raw, RAW)).map_err(text_of)?.label("batch loss per step").legend(swatch(RAW));
    let losses: Vec<f32> = run.steps.iter().map(|s| s.1).collect();
    let window = window(losses.len());
    let smooth = smoothed(&losses, window).into_iter().zip(run.steps).map(|(v, s)| (s.0, v));
    if window > 1 {
        chart
            .draw_series(LineSeries::new(smooth, SMOOTH.stroke_width(2)))
            .map_err(text_of)?
            .label(format!("smoothed (moving average of {} steps)", window / 2 * 2 + 1))
            .legend(swatch(SMOOTH));
    }
    // An epoch's mean loss sits at the middle of its steps.
    let mut start = first.saturating_sub(1);
    let mut means = Vec::with_capacity(run.epochs.len());
    for e in run.epochs {
        // A metric taken before training (epoch 0) has no loss.
        if e.train_loss.is_finite() {
            means.push(((start + e.step).div_ceil(2), e.train_loss));
        }
        start = e.step;
    }
    chart
        .draw_series(means.into_iter().map(|p| Circle::new(p, 4, EPOCH.filled())))
        .map_err(text_of)?
        .label("mean loss of each epoch")
        .legend(|(x, y)| Circle::new((x + 10, y), 4, EPOCH.filled()));
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn draw_metric(area: &Area<'_>, run: &RunCurves<'_>) -> Result<(), String> {
    let first = run.epochs.first().map_or(1, |e| e.epoch);
    let last = run.epochs.last().map_or(1, |e| e.epoch);
    let values = run.epochs.iter().map(|e| e.metric).filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
    let pad = ((hi - lo) * 0.15).max(hi.abs() * 0.02).max(1e-3);
    let (lo, hi) = if run.percent { ((lo - pad).max(0.0), (hi + pad).min(100.0)) } else { (lo - pad, hi + pad) };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{} after each epoch", run.metric_label), (FAMILY, 18))
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(first.saturating_sub(1)..last + 1, lo..hi)
        .map_err(text_of)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(run.metric_label)
        .x_labels(((last - first) as usize + 3).min(12))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(246, 246, 246))
        .draw()
        .map_err(text_of)?;
    let points: Vec<(u64, f64)> = run.epochs.iter().map(|e| (e.epoch, e.metric)).collect();
    chart.draw_series(LineSeries::new(points.clone(), METRIC.stroke_width(2))).map_err(text_of)?;
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 4, METRIC.filled())))
        .map_err(text_of)?
        .label(match points.last() {
            Some(&(_, v)) if run.percent => format!("{}, last {v:.2}%", run.metric_label),
            Some(&(_, v)) => format!("{}, last {v:.4}", run.metric_label),
            None => run.metric_label.to_string(),
        })
        .legend(|(x, y)| Circle::new((x + 10, y), 4, METRIC.filled()));
    // Accuracy rises and a loss falls: keep the legend out of the curve's way.
    legend(&mut chart, if run.percent { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperRight })
}

/// A short line of `color` for a legend entry.
fn swatch(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
}

fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()
        .map_err(text_of)
}

#[cfg(test)]
mod tests {
    use super::super::{pixels, render_rgb};
    use super::*;

    fn run(title: &str) -> Vec<u8> {
        let steps: Vec<(u64, f32)> =
            (1..=120).map(|s| (s, 2.3 / (1.0 + s as f32 / 20.0) + 0.05 * (s % 3) as f32)).collect();
        let epochs: Vec<EpochPoint> = (1..=3)
            .map(|e| EpochPoint { step: e * 40, epoch: e, train_loss: 1.5 / e as f64, metric: 80.0 + 5.0 * e as f64 })
            .collect();
        let curves =
            RunCurves { title, steps: &steps, epochs: &epochs, metric_label: "test accuracy (%)", percent: true };
        render_rgb(SIZE, |root| draw(root, &curves)).unwrap()
    }

    #[test]
    fn the_title_is_drawn_as_text() {
        let (with, without) = (run("mnist: Adam lr 0.001, batch 64, 3 epochs"), run(""));
        let changed = pixels::differing(&with, &without, SIZE.0, (0, 0), (SIZE.0, TITLE_HEIGHT));
        assert!(changed > 500, "only {changed} title pixels differ from an untitled plot");
        assert_eq!(pixels::differing(&with, &without, SIZE.0, (0, TITLE_HEIGHT), SIZE), 0, "only the title differs");
    }

    #[test]
    fn the_axes_carry_numbers_and_labels() {
        let picture = run("t");
        // The y tick labels and axis label sit left of the loss panel's plotting area.
        let left = pixels::inked(&picture, SIZE.0, (0, TITLE_HEIGHT + 40), (60, 400));
        assert!(left > 300, "{left} inked pixels in the y label area");
        // The x tick labels and axis label sit under the metric panel.
        let bottom = pixels::inked(&picture, SIZE.0, (100, SIZE.1 - 45), (SIZE.0, SIZE.1));
        assert!(bottom > 300, "{bottom} inked pixels in the x label area");
    }

    #[test]
    fn the_png_file_is_written_and_its_title_changes_it() {
        let dir = std::env::temp_dir().join(format!("forgia-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let steps = [(1, 2.0), (2, 1.5), (3, 1.0)];
        let epochs = [EpochPoint { step: 3, epoch: 1, train_loss: 1.5, metric: 50.0 }];
        let mut run =
            RunCurves { title: "", steps: &steps, epochs: &epochs, metric_label: "test accuracy (%)", percent: true };
        let (blank, titled) = (dir.join("blank.png"), dir.join("titled.png"));
        write(&blank, &run).unwrap();
        run.title = "spirals: MLP, Adam, lr 0.01";
        write(&titled, &run).unwrap();
        let (blank, titled) = (std::fs::read(&blank).unwrap(), std::fs::read(&titled).unwrap());
        assert_eq!(&titled[..8], b"\x89PNG\r\n\x1a\n");
        assert_ne!(blank, titled);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn smoothing_averages_a_centered_window() {
        let s = smoothed(&[4.0, 4.0, 4.0, 1.0, 1.0, 1.0], 2);
        assert_eq!(s, [4.0, 4.0, 3.0, 2.0, 1.0, 1.0]);
        assert_eq!(smoothed(&[1.0, 3.0], 10), [2.0, 2.0], "the window shrinks at the ends");
        assert_eq!(window(10), 1);
        assert_eq!(window(2000), 100);
    }
}
