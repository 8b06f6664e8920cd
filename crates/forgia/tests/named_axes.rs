//! Axis names travel through ops (shared/DESIGN.md, "Axes"): every op keeps the names of the
//! axes it keeps, a new axis is unnamed, and operands align by name as they broadcast — from
//! the right — or fail with `AxisNameMismatch`.

use forgia::{ErrorKind, Indices, Result, Rng, Tensor};

type Names = Option<Vec<Option<String>>>;

fn names(v: &[Option<&str>]) -> Names {
    Some(v.iter().map(|s| s.map(str::to_string)).collect())
}

/// A `[2, 3, 4]` variable named `batch, seq, feat`.
fn x() -> Tensor {
    let t = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut Rng::new(7)).unwrap().into_variable();
    t.with_names(&[Some("batch"), Some("seq"), Some("feat")]).unwrap()
}

const ALL: [Option<&str>; 3] = [Some("batch"), Some("seq"), Some("feat")];

fn assert_names(what: &str, t: Result<Tensor>, expected: Names) {
    let t = t.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(t.names(), expected, "{what}");
}

#[test]
fn pointwise_ops_keep_every_name() {
    let x = x();
    let all = names(&ALL);
    for (what, t) in [
        ("neg", Ok(x.neg())),
        ("exp", Ok(x.exp())),
        ("tanh", Ok(x.tanh())),
        ("relu", Ok(x.relu())),
        ("gelu", Ok(x.gelu())),
        ("sigmoid", Ok(x.sigmoid())),
        ("square", Ok(x.square())),
        ("pow_scalar", Ok(x.pow_scalar(3.0))),
        ("scale", Ok(x.scale(2.0))),
        ("clamp", x.clamp(-1.0, 1.0)),
        ("dropout", x.dropout(0.5, 1, true)),
        ("detach", Ok(x.detach())),
        ("contiguous", x.contiguous()),
        ("softmax", x.softmax("feat")),
        ("log_softmax", x.log_softmax(-1)),
        ("cumsum", x.cumsum("seq")),
        ("flip", x.flip(1)),
    ] {
        assert_names(what, t, all.clone());
    }
}

#[test]
fn reductions_drop_the_names_of_the_reduced_axes() -> Result<()> {
    let x = x();
    assert_eq!(x.sum("seq", false)?.names(), names(&[Some("batch"), Some("feat")]));
    assert_eq!(x.sum("seq", true)?.names(), names(&ALL));
    // The example: reduce one named axis, then another.
    assert_eq!(x.sum("batch", false)?.sum("feat", false)?.names(), names(&[Some("seq")]));
    assert_eq!(x.mean(["batch", "seq"], false)?.names(), names(&[Some("feat")]));
    assert_eq!(x.max("feat", false)?.names(), names(&[Some("batch"), Some("seq")]));
    assert_eq!(x.min("feat", true)?.names(), names(&ALL));
    assert_eq!(x.var("seq", 1, false)?.names(), names(&[Some("batch"), Some("feat")]));
    assert_eq!(x.logsumexp("feat", false)?.names(), names(&[Some("batch"), Some("seq")]));
    assert_eq!(x.prod("batch", false)?.names(), names(&[Some("seq"), Some("feat")]));
    // Reducing every named axis leaves no names.
    assert_eq!(x.sum(["batch", "seq", "feat"], false)?.names(), None);
    Ok(())
}

#[test]
fn shape_ops_keep_the_names_of_the_axes_they_keep() -> Result<()> {
    let x = x();
    assert_eq!(x.unsqueeze(1)?.names(), names(&[Some("batch"), None, Some("seq"), Some("feat")]));
    assert_eq!(x.unsqueeze(1)?.squeeze(1)?.names(), names(&ALL));
    assert_eq!(x.transpose("seq", "feat")?.names(), names(&[Some("batch"), Some("feat"), Some("seq")]));
    assert_eq!(x.narrow("seq", 1, 2)?.names(), names(&ALL));
    assert_eq!(x.slice("feat", 0, 4, 2)?.names(), names(&ALL));
    assert_eq!(x.pad(&[(0, 0), (1, 1), (0, 0)], 0.0)?.names(), names(&ALL));
    assert_eq!(x.repeat(&[1, 2, 1])?.names(), names(&ALL));
    for part in x.split("seq", &[1, 2])? {
        assert_eq!(part.names(), names(&ALL));
    }
    assert_eq!(x.chunk(2, "feat")?[1].names(), names(&ALL));
    assert_eq!(Tensor::concat(&[&x, &x], "seq")?.names(), names(&ALL));
    assert_eq!(Tensor::stack(&[&x, &x], 0)?.names(), names(&[None, Some("batch"), Some("seq"), Some("feat")]));
    assert_eq!(x.broadcast_to(&[5, 2, 3, 4])?.names(), names(&[None, Some("batch"), Some("seq"), Some("feat")]));
    // A reshape makes new axes: the names go.
    assert_eq!(x.reshape(&[6, 4])?.names(), None);
    Ok(())
}

#[test]
fn normalization_and_index_ops_keep_names() -> Result<()> {
    let x = x();
    let all = names(&ALL);
    assert_eq!(x.layer_norm(&[4], None, None, 1e-5)?.names(), all);
    assert_eq!(x.rms_norm(None, 1e-5)?.names(), all);
    let idx = Indices::new(vec![0, 2], &[2])?;
    assert_eq!(x.index_select("seq", &idx)?.names(), all);
    let mask = Tensor::ones(&[2, 3, 4])?;
    assert_eq!(x.masked_fill(&mask, 0.0)?.names(), all);
    assert_eq!(Tensor::where_(&mask, &x, &x)?.names(), all);
    Ok(())
}

#[test]
fn products_keep_the_names_of_their_free_axes() -> Result<()> {
    let x = x();
    let w = Tensor::ones(&[4, 5])?.with_names(&[Some("feat"), Some("out")])?;
    assert_eq!(x.matmul(&w)?.names(), names(&[Some("batch"), Some("seq"), Some("out")]));
    // linear maps the last axis to a new one: the leading names stay, the new axis is unnamed.
    let lw = Tensor::ones(&[5, 4])?;
    assert_eq!(x.linear(&lw, None)?.names(), names(&[Some("batch"), Some("seq"), None]));
    Ok(())
}

#[test]
fn broadcasting_aligns_names_from_the_right() -> Result<()> {
    let x = x();
    let bias = Tensor::ones(&[4])?.with_names(&[Some("feat")])?;
    assert_eq!(x.add(&bias)?.names(), names(&ALL));
    // An unnamed operand takes the names of the named one.
    assert_eq!(x.mul(&Tensor::ones(&[3, 4])?)?.names(), names(&ALL));
    Ok(())
}

#[test]
fn broadcasting_a_misaligned_name_fails_instead_of_aligning_by_position() {
    let a = Tensor::ones(&[3, 3]).unwrap().with_names(&[Some("batch"), Some("feat")]).unwrap();
    let b = Tensor::ones(&[3]).unwrap().with_names(&[Some("batch")]).unwrap();
    for r in [a.add(&b), a.mul(&b), a.sub(&b), Tensor::where_(&b, &a, &a)] {
        let e = r.unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::AxisNameMismatch { .. }), "{e}");
        assert!(e.to_string().contains("batch"), "{e}");
    }
    // The same name at two different positions is not aligned either.
    let c = Tensor::ones(&[3, 3]).unwrap().with_names(&[Some("feat"), Some("batch")]).unwrap();
    assert!(a.add(&c).is_err());
    assert!(Tensor::concat(&[&a, &c], 0).is_err());
}

#[test]
fn gradients_of_named_operands_have_their_shapes() -> Result<()> {
    let x = x();
    let bias = Tensor::ones(&[4])?.with_names(&[Some("feat")])?.into_variable();
    let y = x.add(&bias)?.sum("batch", false)?.sum("feat", false)?.sum_all();
    y.backward()?;
    assert_eq!(bias.grad().unwrap().shape(), &[4]);
    assert_eq!(x.grad().unwrap().shape(), &[2, 3, 4]);
    Ok(())
}
