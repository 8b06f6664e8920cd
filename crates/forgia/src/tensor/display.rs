//! `Display` and `Debug` for arrays (and through them tensors), PyTorch style: nested
//! brackets, long axes elided.

use std::fmt;

use super::Array;

const EDGE: usize = 3;
const FULL: usize = 8;

fn write_axis(f: &mut fmt::Formatter<'_>, data: &[f32], shape: &[usize], depth: usize) -> fmt::Result {
    if shape.is_empty() {
        return write!(f, "{:.4}", data[0]);
    }
    let n = shape[0];
    let step = data.len() / n.max(1);
    write!(f, "[")?;
    let show = |i: usize| n <= FULL || i < EDGE || i >= n - EDGE;
    let mut elided = false;
    for i in 0..n {
        if !show(i) {
            if !elided {
                write!(f, ", ...")?;
                elided = true;
            }
            continue;
        }
        if i > 0 {
            write!(f, ",")?;
            if shape.len() > 1 {
                write!(f, "\n{:width$}", "", width = depth + 1)?;
            } else {
                write!(f, " ")?;
            }
        }
        write_axis(f, &data[i * step..(i + 1) * step], &shape[1..], depth + 1)?;
    }
    write!(f, "]")
}

impl Array {
    /// Writes `tensor([...], shape=.., names=.., grad_fn=..)`, the last part when `grad_fn` is
    /// given (a tensor's record name).
    pub(crate) fn write_to(&self, f: &mut fmt::Formatter<'_>, grad_fn: Option<&str>) -> fmt::Result {
        let data = self.to_vec();
        write!(f, "tensor(")?;
        if data.is_empty() {
            write!(f, "[]")?;
        } else {
            write_axis(f, &data, self.shape(), 7)?;
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
    }
}
