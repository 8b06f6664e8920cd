//! Contractions lowered to [`Tensor::matmul`]: `dot` over one (named or positional) axis of
//! both operands, and two-operand `einsum`. Operands are permuted into `[batch, free,
//! contracted]` form (a view; a copy only when the permuted layout cannot be reshaped), so
//! every backward is a GEMM through matmul's record.

use crate::autograd::Tensor;
use crate::error::{fail, within, ErrorKind, Result};
use crate::tensor::layout::numel;
use crate::tensor::Axis;

impl Tensor {
    /// Contracts `axis` of `self` with the same axis of `other` (the same name, or the same
    /// position — a negative position counts from each operand's end). The result's axes are
    /// `self`'s remaining axes, then `other`'s; names carry over.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::ones(&[2, 3])?.with_names(&[Some("batch"), Some("in")])?;
    /// let w = Tensor::ones(&[3, 4])?.with_names(&[Some("in"), Some("out")])?;
    /// let y = x.dot(&w, "in")?;
    /// assert_eq!(y.shape(), &[2, 4]);
    /// assert_eq!(y.names().unwrap(), vec![Some("batch".to_string()), Some("out".to_string())]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: matmul's (`ga = gy · bᵀ`, `gb = aᵀ · gy`), through permute and reshape.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` when either operand lacks the axis;
    /// `ShapeMismatch` when the contracted sizes differ; `DuplicateAxis` when the result would
    /// carry one name twice.
    pub fn dot(&self, other: &Tensor, axis: impl Into<Axis>) -> Result<Tensor> {
        within("dot", || {
            let axis = axis.into();
            let (a, b) = (self.axis("dot", &axis)?, other.axis("dot", &axis)?);
            if self.shape()[a] != other.shape()[b] {
                return fail(ErrorKind::ShapeMismatch {
                    op: "dot",
                    lhs: self.shape().to_vec(),
                    rhs: other.shape().to_vec(),
                });
            }
            let k = self.shape()[a];
            let rest = |t: &Tensor, x: usize| -> Vec<usize> { (0..t.rank()).filter(|&i| i != x).collect() };
            let (ra, rb) = (rest(self, a), rest(other, b));
            let pa: Vec<usize> = ra.iter().copied().chain([a]).collect();
            let pb: Vec<usize> = [b].into_iter().chain(rb.iter().copied()).collect();
            let m: usize = ra.iter().map(|&i| self.shape()[i]).product();
            let n: usize = rb.iter().map(|&i| other.shape()[i]).product();
            let lhs = self.permute(&pa)?.reshape(&[m, k])?;
            let rhs = other.permute(&pb)?.reshape(&[k, n])?;
            let shape: Vec<usize> =
                ra.iter().map(|&i| self.shape()[i]).chain(rb.iter().map(|&i| other.shape()[i])).collect();
            let out = lhs.matmul(&rhs)?.reshape(&shape)?;
            if self.names.is_none() && other.names.is_none() {
                return Ok(out);
            }
            let name = |t: &Tensor, i: usize| t.names.as_ref().and_then(|n| n[i].clone());
            let names: Vec<Option<String>> =
                ra.iter().map(|&i| name(self, i)).chain(rb.iter().map(|&i| name(other, i))).collect();
            out.with_names(&names)
        })
    }

    /// Two-operand Einstein summation, e.g. `"ij,jk->ik"`, `"bij,bjk->bik"`, `"ij,ij->i"`,
    /// `"i,j->ij"`. Labels are ASCII letters; a label in both operands and the output is a
    /// batch axis, in both operands only is contracted, in one operand and the output is free,
    /// and in one operand only is summed out first. Without `->`, the output is the labels that
    /// appear once, sorted.
    ///
    /// Backward: through sum, permute, reshape and matmul (every contraction gradient is a GEMM).
    ///
    /// # Errors
    /// `InvalidArgument` for a malformed equation (not two operands, a non-letter, a label
    /// repeated within one operand or the output, an output label in no operand);
    /// `RankMismatch` when an operand's label count differs from its rank; `ShapeMismatch` when
    /// a label's sizes differ between operands.
    pub fn einsum(equation: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let spec = parse(equation)?;
        for (labels, t) in [(&spec.a, a), (&spec.b, b)] {
            if labels.len() != t.rank() {
                return fail(ErrorKind::RankMismatch {
                    op: "einsum",
                    expected: "one label per axis",
                    shape: t.shape().to_vec(),
                });
            }
        }
        for (i, l) in spec.a.iter().enumerate() {
            if let Some(j) = spec.b.iter().position(|x| x == l) {
                if a.shape()[i] != b.shape()[j] {
                    return fail(ErrorKind::ShapeMismatch {
                        op: "einsum",
                        lhs: a.shape().to_vec(),
                        rhs: b.shape().to_vec(),
                    });
                }
            }
        }
        within("einsum", || contract(&spec, a, b))
    }
}

/// The contraction of a checked two-operand equation: each operand's own labels summed
/// away, then one batched matmul between arranged views, reshaped and permuted to `out`.
fn contract(spec: &Spec, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, la) = sum_own(a, &spec.a, &spec.b, &spec.out)?;
    let (b, lb) = sum_own(b, &spec.b, &la, &spec.out)?;
    let in_out = |l: &char| spec.out.contains(l);
    let batch: Vec<char> = la.iter().filter(|l| lb.contains(l) && in_out(l)).copied().collect();
    let contr: Vec<char> = la.iter().filter(|l| lb.contains(l) && !in_out(l)).copied().collect();
    let free_a: Vec<char> = la.iter().filter(|l| !lb.contains(l)).copied().collect();
    let free_b: Vec<char> = lb.iter().filter(|l| !la.contains(l)).copied().collect();
    let size = |t: &Tensor, ls: &[char], l: char| t.shape()[ls.iter().position(|&x| x == l).unwrap_or(0)];
    let sizes = |t: &Tensor, ls: &[char], sel: &[char]| -> Vec<usize> { sel.iter().map(|&l| size(t, ls, l)).collect() };
    let (bs, ms, ks, ns) =
        (sizes(&a, &la, &batch), sizes(&a, &la, &free_a), sizes(&a, &la, &contr), sizes(&b, &lb, &free_b));
    let lhs = arrange(&a, &la, &[&batch, &free_a, &contr], &[numel(&bs), numel(&ms), numel(&ks)])?;
    let rhs = arrange(&b, &lb, &[&batch, &contr, &free_b], &[numel(&bs), numel(&ks), numel(&ns)])?;
    let prod = lhs.matmul(&rhs)?;
    let labels: Vec<char> = batch.iter().chain(&free_a).chain(&free_b).copied().collect();
    let shape: Vec<usize> = bs.iter().chain(&ms).chain(&ns).copied().collect();
    let y = prod.reshape(&shape)?;
    let perm: Vec<usize> = spec.out.iter().map(|l| labels.iter().position(|x| x == l).unwrap_or(0)).collect();
    y.permute(&perm)
}

/// A parsed two-operand equation.
struct Spec {
    a: Vec<char>,
    b: Vec<char>,
    out: Vec<char>,
}

fn parse(equation: &str) -> Result<Spec> {
    let bad = |reason: String| ErrorKind::InvalidArgument { op: "einsum", arg: "equation", reason };
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (ins, out) = match eq.split_once("->") {
        Some((i, o)) => (i.to_string(), Some(o.to_string())),
        None => (eq.clone(), None),
    };
    let ops: Vec<&str> = ins.split(',').collect();
    if ops.len() != 2 {
        return fail(bad(format!("{equation:?} needs exactly two operands")));
    }
    let labels = |s: &str| -> Result<Vec<char>> {
        let v: Vec<char> = s.chars().collect();
        for (i, c) in v.iter().enumerate() {
            if !c.is_ascii_alphabetic() {
                return fail(bad(format!("{equation:?}: {c:?} is not a letter")));
            }
            if v[..i].contains(c) {
                return fail(bad(format!("{equation:?}: label {c:?} repeated (diagonals are not supported)")));
            }
        }
        Ok(v)
    };
    let (a, b) = (labels(ops[0])?, labels(ops[1])?);
    let out = match out {
        Some(o) => labels(&o)?,
        None => {
            let mut once: Vec<char> =
                a.iter().chain(&b).filter(|l| !(a.contains(l) && b.contains(l))).copied().collect();
            once.sort_unstable();
            once
        }
    };
    if let Some(l) = out.iter().find(|l| !a.contains(l) && !b.contains(l)) {
        return fail(bad(format!("{equation:?}: output label {l:?} is in no operand")));
    }
    Ok(Spec { a, b, out })
}

/// Sums out the labels of `t` that are in neither `other` nor `out`; returns the remaining labels.
fn sum_own(t: &Tensor, labels: &[char], other: &[char], out: &[char]) -> Result<(Tensor, Vec<char>)> {
    let axes: Vec<usize> =
        (0..labels.len()).filter(|&i| !other.contains(&labels[i]) && !out.contains(&labels[i])).collect();
    if axes.is_empty() {
        return Ok((t.clone(), labels.to_vec()));
    }
    let kept = labels.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &l)| l).collect();
    Ok((t.sum(axes, false)?, kept))
}

/// Permutes `t` so the label `groups` come in order, then reshapes to `dims` (one per group).
fn arrange(t: &Tensor, labels: &[char], groups: &[&Vec<char>], dims: &[usize]) -> Result<Tensor> {
    let perm: Vec<usize> =
        groups.iter().flat_map(|g| g.iter()).map(|l| labels.iter().position(|x| x == l).unwrap_or(0)).collect();
    t.permute(&perm)?.reshape(dims)
}
