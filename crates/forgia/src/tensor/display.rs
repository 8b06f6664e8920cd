//! `Display` and `Debug` for arrays (and through them tensors), PyTorch style: nested
//! brackets, long axes elided.

use std::fmt;

use super::Array;

const EDGE: usize = 3;
const FULL: usize = 8;

/// Writes the sub-array at storage offset `base` over axes `depth..`: only the elements shown
/// are read, straight from the storage, so a view far larger than memory prints like any other.
fn write_axis(f: &mut fmt::Formatter<'_>, x: &Array, data: &[f32], base: isize, depth: usize) -> fmt::Result {
    let (shape, strides) = (&x.layout.shape, &x.layout.strides);
    if depth == shape.len() {
        return write!(f, "{:.4}", data[base as usize]);
    }
    let n = shape[depth];
    write!(f, "[")?;
    // The shown positions only: all of a short axis, the first and last EDGE of a long one.
    let positions: Vec<usize> = if n <= FULL { (0..n).collect() } else { (0..EDGE).chain(n - EDGE..n).collect() };
    for (j, &i) in positions.iter().enumerate() {
        if j > 0 {
            if n > FULL && j == EDGE {
                write!(f, ", ...")?;
            }
            write!(f, ",")?;
            if depth + 1 < shape.len() {
                write!(f, "\n{:width$}", "", width = depth + 8)?;
            } else {
                write!(f, " ")?;
            }
        }
        write_axis(f, x, data, base + i as isize * strides[depth], depth + 1)?;
    }
    write!(f, "]")
}

impl Array {
    /// Writes `tensor([...], shape=.., names=.., grad_fn=..)`, the last part when `grad_fn` is
    /// given (a tensor's record name).
    pub(crate) fn write_to(&self, f: &mut fmt::Formatter<'_>, grad_fn: Option<&str>) -> fmt::Result {
        write!(f, "tensor(")?;
        if self.numel() == 0 {
            write!(f, "[]")?;
        } else {
            let storage = self.storage();
            write_axis(f, self, storage.as_slice(), self.layout.offset as isize, 0)?;
        }
        write!(f, ", shape={:?}", self.shape())?;
        if let Some(names) = &self.names {
            write!(f, ", names={:?}", names)?;
        }
        if let Some(name) = grad_fn {
            write!(f, ", grad_fn={name}")?;
        }
        write!(f, ")")
    }
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f, None)
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    #[test]
    fn display_reads_like_pytorch() {
        let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        assert_eq!(format!("{t}"), "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], shape=[2, 2])");
        let long = Tensor::arange(0.0, 20.0, 1.0).unwrap();
        assert!(format!("{long}").contains("..."));
        assert_eq!(format!("{long}"), "tensor([0.0000, 1.0000, 2.0000, ..., 17.0000, 18.0000, 19.0000], shape=[20])");
    }

    #[test]
    fn a_view_far_larger_than_memory_prints_its_corners() {
        let huge = Tensor::scalar(1.5).broadcast_to(&[1 << 40, 2]).unwrap();
        let text = format!("{huge}");
        assert!(text.starts_with("tensor([[1.5000, 1.5000],"), "{text}");
        assert!(text.contains("..."), "{text}");
    }
}
