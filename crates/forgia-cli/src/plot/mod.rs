//! The pictures the CLI writes: a run's loss and metric curves ([`curves`]) and a confusion
//! matrix heat map ([`confusion`]). Text is drawn by plotters' own rasterizer from the DejaVu
//! Sans font shipped in `assets/` (license beside it), so no system font is needed.

pub(crate) mod confusion;
pub(crate) mod curves;

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// The font every picture uses, compiled into the binary.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// The font family name the pictures ask for (plotters' default family name, so elements
/// that pick their own font, like legends, find it too).
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers the bundled font once per process (plain and bold: the bold style falls back to
/// the same face).
fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let invalid = |_| "the bundled font assets/DejaVuSans.ttf is not a valid font".to_string();
            register_font(FAMILY, FontStyle::Normal, FONT).map_err(invalid)?;
            register_font(FAMILY, FontStyle::Bold, FONT).map_err(invalid)
        })
        .clone()
}

/// The drawing surface of every picture: a bitmap, in a file or in memory.
pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Any drawing error as text (plotters' errors are generic over the backend).
pub(crate) fn text_of<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws a `width`×`height` picture with `draw` and writes it to `path` as a PNG.
///
/// # Errors
/// A message when the font cannot be loaded, a drawing step fails or the file cannot be
/// written.
pub(crate) fn render_png<F>(path: &Path, (width, height): (u32, u32), draw: F) -> Result<(), String>
where
    F: FnOnce(&Area<'_>) -> Result<(), String>,
{
    ensure_font()?;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(text_of)?;
    draw(&root)?;
    root.present().map_err(text_of)
}

/// Draws a `width`×`height` picture with `draw` into memory: RGB bytes, row by row (for tests
/// that look at the pixels).
///
/// # Errors
/// As [`render_png`], without the file.
#[cfg(test)]
pub(crate) fn render_rgb<F>((width, height): (u32, u32), draw: F) -> Result<Vec<u8>, String>
where
    F: FnOnce(&Area<'_>) -> Result<(), String>,
{
    ensure_font()?;
    let mut buffer = vec![0u8; (width * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buffer, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(text_of)?;
        draw(&root)?;
        root.present().map_err(text_of)?;
    }
    Ok(buffer)
}

/// Test helpers: count the pixels that differ between two renders inside a rectangle.
#[cfg(test)]
pub(crate) mod pixels {
    /// Pixels inside `(x0, y0)..(x1, y1)` where the RGB images `a` and `b` of width `width`
    /// differ.
    pub(crate) fn differing(a: &[u8], b: &[u8], width: u32, (x0, y0): (u32, u32), (x1, y1): (u32, u32)) -> usize {
        let mut count = 0;
        for y in y0..y1 {
            for x in x0..x1 {
                let i = ((y * width + x) * 3) as usize;
                if a[i..i + 3] != b[i..i + 3] {
                    count += 1;
                }
            }
        }
        count
    }

    /// Pixels inside the rectangle that are not white.
    pub(crate) fn inked(a: &[u8], width: u32, from: (u32, u32), to: (u32, u32)) -> usize {
        differing(a, &vec![255u8; a.len()], width, from, to)
    }
}
