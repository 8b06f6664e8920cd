//! A confusion matrix as a heat map: one row per true class, one column per predicted class,
//! each cell shaded by its share of the row and labelled with its count.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{render_png, text_of, Area, FAMILY};

/// The picture's size in pixels.
pub(crate) const SIZE: (u32, u32) = (720, 740);
/// Room for the title at the top.
const TITLE: i32 = 60;
/// Room for the row labels and the rotated axis label at the left.
const LEFT: i32 = 90;
/// Room for the column labels and the axis label at the bottom.
const BOTTOM: i32 = 80;
/// Space kept free at the right.
const RIGHT: i32 = 30;

/// Writes the heat map of `counts` (`counts[true][predicted]`, square) to `path` as a PNG.
///
/// # Errors
/// A message when drawing or writing fails.
pub(crate) fn write(path: &Path, title: &str, counts: &[Vec<usize>]) -> Result<(), String> {
    render_png(path, SIZE, |root| draw(root, title, counts))
}

/// The shade of a cell holding `share` (0..=1) of its row: white to dark blue.
fn shade(share: f64) -> RGBColor {
    let mix = |from: f64, to: f64| (from + (to - from) * share.clamp(0.0, 1.0)).round() as u8;
    RGBColor(mix(255.0, 20.0), mix(255.0, 60.0), mix(255.0, 160.0))
}

/// Draws the heat map on `root` (a white area of [`SIZE`]).
///
/// # Errors
/// A message when a drawing step fails.
pub(crate) fn draw(root: &Area<'_>, title: &str, counts: &[Vec<usize>]) -> Result<(), String> {
    let n = counts.len().max(1) as i32;
    let (w, h) = root.dim_in_pixel();
    let cell = ((w as i32 - LEFT - RIGHT) / n).min((h as i32 - TITLE - BOTTOM) / n).max(1);
    let (x0, y0) = (LEFT, TITLE);
    let centered = |size| TextStyle::from((FAMILY, size).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    root.draw_text(title, &centered(20), (w as i32 / 2, TITLE / 2)).map_err(text_of)?;
    for (row, line) in counts.iter().enumerate() {
        let total = line.iter().sum::<usize>().max(1) as f64;
        for (col, &count) in line.iter().enumerate() {
            let share = count as f64 / total;
            let (x, y) = (x0 + col as i32 * cell, y0 + row as i32 * cell);
            root.draw(&Rectangle::new([(x, y), (x + cell, y + cell)], shade(share).filled())).map_err(text_of)?;
            root.draw(&Rectangle::new([(x, y), (x + cell, y + cell)], RGBColor(210, 210, 210))).map_err(text_of)?;
            let ink = if share > 0.5 { WHITE } else { BLACK };
            let style = centered(15).color(&ink);
            root.draw_text(&count.to_string(), &style, (x + cell / 2, y + cell / 2)).map_err(text_of)?;
        }
        let label_y = y0 + row as i32 * cell + cell / 2;
        root.draw_text(&row.to_string(), &centered(16), (x0 - 18, label_y)).map_err(text_of)?;
        let label_x = x0 + row as i32 * cell + cell / 2;
        root.draw_text(&row.to_string(), &centered(16), (label_x, y0 + n * cell + 16)).map_err(text_of)?;
    }
    let grid_mid = (x0 + n * cell / 2, y0 + n * cell / 2);
    root.draw_text("predicted digit", &centered(17), (grid_mid.0, y0 + n * cell + 50)).map_err(text_of)?;
    let rotated = TextStyle::from((FAMILY, 17).into_font().transform(FontTransform::Rotate270))
        .pos(Pos::new(HPos::Center, VPos::Center));
    root.draw_text("true digit", &rotated, (28, grid_mid.1)).map_err(text_of)
}

#[cfg(test)]
mod tests {
    use super::super::{pixels, render_rgb};
    use super::*;

    #[test]
    fn every_cell_is_shaded_by_its_share_and_labelled() {
        let counts: Vec<Vec<usize>> =
            (0..10).map(|r| (0..10).map(|c| if r == c { 90 } else { r % 3 }).collect()).collect();
        let picture = render_rgb(SIZE, |root| draw(root, "confusion", &counts)).unwrap();
        let blank = render_rgb(SIZE, |root| draw(root, "", &vec![vec![0; 10]; 10])).unwrap();
        assert!(pixels::differing(&picture, &blank, SIZE.0, (0, 0), (SIZE.0, TITLE as u32)) > 100, "title");
        // A diagonal cell is dark: its centre pixel region is mostly not white.
        let cell = ((SIZE.0 as i32 - LEFT - RIGHT) / 10) as u32;
        let (x, y) = (LEFT as u32 + 3 * cell, TITLE as u32 + 3 * cell);
        let dark = pixels::inked(&picture, SIZE.0, (x + 2, y + 2), (x + cell - 2, y + cell - 2));
        assert!(dark > (cell * cell / 2) as usize, "{dark}");
        assert_eq!(shade(0.0), WHITE);
    }
}
