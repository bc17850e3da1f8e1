//! Images the OCR tests draw themselves: a line of text set in DejaVu Sans (Debian's
//! `fonts-dejavu-core`, which `.ci/run` installs) and encoded as PNG. Nothing is downloaded.

use std::io::Cursor;

use ab_glyph::{Font, FontVec, PxScale, ScaleFont, point};
use image::{GrayImage, ImageFormat, Luma, Rgba, RgbaImage};

/// Where Debian's `fonts-dejavu-core` puts the regular face.
pub const DEJAVU_SANS: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// How the text is laid on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paper {
    /// Black ink on an opaque white page (8-bit grey).
    White,
    /// Black ink on a fully transparent page (RGBA, coverage in the alpha channel).
    Transparent,
}

/// `text` on one line, `px` pixels high, with a margin of half a line, as PNG bytes.
pub fn text_png(text: &str, px: f32, paper: Paper) -> Result<Vec<u8>, String> {
    let data = std::fs::read(DEJAVU_SANS).map_err(|e| {
        format!("{DEJAVU_SANS}: {e} (install Debian's fonts-dejavu-core, as .ci/run does)")
    })?;
    let font = FontVec::try_from_vec(data).map_err(|e| format!("{DEJAVU_SANS}: {e}"))?;
    let scale = PxScale::from(px);
    let scaled = font.as_scaled(scale);
    let margin = px / 2.0;
    let baseline = margin + scaled.ascent();
    let mut x = margin;
    let mut glyphs = Vec::new();
    let mut previous = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(previous) = previous {
            x += scaled.kern(previous, id);
        }
        glyphs.push(id.with_scale_and_position(scale, point(x, baseline)));
        x += scaled.h_advance(id);
        previous = Some(id);
    }
    let width = (x + margin).ceil() as u32;
    let height = (baseline - scaled.descent() + margin).ceil() as u32;
    let mut ink = vec![0f32; (width * height) as usize];
    for glyph in glyphs {
        let Some(outline) = font.outline_glyph(glyph) else {
            continue;
        };
        let bounds = outline.px_bounds();
        outline.draw(|gx, gy, coverage| {
            let px = bounds.min.x as i64 + i64::from(gx);
            let py = bounds.min.y as i64 + i64::from(gy);
            if (0..i64::from(width)).contains(&px) && (0..i64::from(height)).contains(&py) {
                let i = (py as u32 * width + px as u32) as usize;
                ink[i] = (ink[i] + coverage).min(1.0);
            }
        });
    }
    let level = |i: usize| (ink[i] * 255.0).round() as u8;
    let mut out = Cursor::new(Vec::new());
    let written = match paper {
        Paper::White => GrayImage::from_fn(width, height, |x, y| {
            Luma([255 - level((y * width + x) as usize)])
        })
        .write_to(&mut out, ImageFormat::Png),
        Paper::Transparent => RgbaImage::from_fn(width, height, |x, y| {
            Rgba([0, 0, 0, level((y * width + x) as usize)])
        })
        .write_to(&mut out, ImageFormat::Png),
    };
    written.map_err(|e| format!("encoding the PNG: {e}"))?;
    Ok(out.into_inner())
}
