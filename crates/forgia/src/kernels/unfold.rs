//! Sliding-window copies for `unfold` / `fold` (im2col / col2im) over packed
//! `[batch, channels, h, w]` images and `[batch, channels·kh·kw, L]` columns.

/// The geometry of one unfold: image size, kernel, dilation, padding, stride, and the number
/// of window positions along each side.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Windows {
    pub(crate) channels: usize,
    pub(crate) image: [usize; 2],
    pub(crate) kernel: [usize; 2],
    pub(crate) dilation: [usize; 2],
    pub(crate) padding: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) blocks: [usize; 2],
}

impl Windows {
    /// Calls `f(column_index, image_index)` for every in-bounds (window element, position)
    /// pair of one batch element; padded positions are skipped.
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        let ([h, w], [kh, kw], [bh, bw]) = (self.image, self.kernel, self.blocks);
        let l = bh * bw;
        for c in 0..self.channels {
            for i in 0..kh {
                for j in 0..kw {
                    let row = (c * kh + i) * kw + j;
                    for by in 0..bh {
                        let y = (by * self.stride[0] + i * self.dilation[0]) as isize - self.padding[0] as isize;
                        if y < 0 || y >= h as isize {
                            continue;
                        }
                        for bx in 0..bw {
                            let x = (bx * self.stride[1] + j * self.dilation[1]) as isize - self.padding[1] as isize;
                            if x >= 0 && x < w as isize {
                                f(row * l + by * bw + bx, (c * h + y as usize) * w + x as usize);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// im2col: `cols` (zeroed by the caller) gets every window of `image`, one batch element at a
/// time (`image.len() / (C·h·w)` of them).
pub(crate) fn unfold(image: &[f32], g: &Windows, cols: &mut [f32]) {
    let per_image = g.channels * g.image[0] * g.image[1];
    let per_cols = g.channels * g.kernel[0] * g.kernel[1] * g.blocks[0] * g.blocks[1];
    for (img, col) in image.chunks(per_image.max(1)).zip(cols.chunks_mut(per_cols.max(1))) {
        g.each(|ci, ii| col[ci] = img[ii]);
    }
}

/// col2im: `image` (zeroed by the caller) gets the sum of every column entry at its window
/// position: the adjoint of [`unfold`].
pub(crate) fn fold(cols: &[f32], g: &Windows, image: &mut [f32]) {
    let per_image = g.channels * g.image[0] * g.image[1];
    let per_cols = g.channels * g.kernel[0] * g.kernel[1] * g.blocks[0] * g.blocks[1];
    for (col, img) in cols.chunks(per_cols.max(1)).zip(image.chunks_mut(per_image.max(1))) {
        g.each(|ci, ii| img[ii] += col[ci]);
    }
}
