//! Bad input to the comparison, sorting and index-write ops: every row is an `Err` of its
//! named kind whose message names the op — never a panic, never a silently wrong value.

use forgia::{ErrorKind, Indices, Result, Tensor};

mod common;
use common::bad_input::*;

fn drop_indices<T>(r: Result<(T, Indices)>) -> Result<()> {
    r.map(|_| ())
}

#[test]
fn masks_sorts_and_index_writes_turn_bad_input_into_named_errors() {
    let (a23, a34, a4) = (t(&[2, 3]), t(&[3, 4]), t(&[4]));
    let rows: Vec<(&str, Result<()>, Check)> = vec![
        ("eq", a23.eq(&a34).map(drop), shape),
        ("lt", a23.lt(&a4).map(drop), shape),
        ("ge", a34.ge(&t(&[2, 4])).map(drop), shape),
        ("logical_and", a23.logical_and(&a4).map(drop), shape),
        ("logical_xor", a4.logical_xor(&a23).map(drop), shape),
        ("any", a23.any(2, false).map(drop), axis),
        ("all", a23.all(-3, true).map(drop), axis),
        ("sort", drop_indices(a23.sort(2, false)), axis),
        ("argsort", a23.argsort(-3, true).map(drop), axis),
        ("topk", drop_indices(a23.topk(4, 1, true, true)), arg),
        ("topk", drop_indices(a23.topk(1, 5, true, true)), axis),
        ("topk", drop_indices(Tensor::scalar(1.0).topk(2, 0, true, true)), arg),
        ("kthvalue", drop_indices(a23.kthvalue(0, 1, false)), arg),
        ("kthvalue", drop_indices(a23.kthvalue(4, 1, false)), arg),
        ("kthvalue", drop_indices(a23.kthvalue(1, 2, false)), axis),
        ("median", drop_indices(t(&[2, 0]).median(1, false)), empty),
        ("median", drop_indices(a23.median(-3, false)), axis),
        ("median_all", Tensor::zeros(&[0]).unwrap().median_all().map(drop), empty),
        ("argmax", a23.argmax(2, false).map(drop), axis),
        ("argmin", t(&[2, 0]).argmin(1, true).map(drop), empty),
        ("scatter", a23.scatter(1, &idx(&[0, 3], &[1, 2]), &a23).map(drop), index),
        ("scatter", a23.scatter(1, &idx(&[-1, 0], &[1, 2]), &a23).map(drop), index),
        ("scatter", a23.scatter(1, &idx(&[0, 1], &[2]), &a23).map(drop), shape),
        ("scatter", a23.scatter(0, &idx(&[0; 4], &[1, 4]), &a34).map(drop), shape),
        ("scatter", a23.scatter(1, &idx(&[0; 6], &[2, 3]), &t(&[2, 2])).map(drop), shape),
        ("scatter", a23.scatter(2, &idx(&[0], &[1, 1]), &a23).map(drop), axis),
        ("scatter_value", a23.scatter_value(0, &idx(&[2], &[1, 1]), 1.0).map(drop), index),
        ("scatter_value", a23.scatter_value(0, &idx(&[0; 8], &[2, 4]), 1.0).map(drop), shape),
        ("index_copy", a23.index_copy(0, &idx(&[0, 2], &[2]), &a23).map(drop), index),
        ("index_copy", a23.index_copy(0, &idx(&[0, 1], &[1, 2]), &a23).map(drop), shape),
        ("index_copy", a23.index_copy(1, &idx(&[0, 1], &[2]), &a23).map(drop), shape),
        ("index_copy", a23.index_copy(-3, &idx(&[0], &[1]), &a23).map(drop), axis),
        ("index_put", a23.index_put(&[], &a4, false).map(drop), arg),
        ("index_put", a23.index_put(&[idx(&[0], &[1]), idx(&[0], &[1]), idx(&[0], &[1])], &a4, false).map(drop), arg),
        ("index_put", a23.index_put(&[idx(&[0, 2], &[2])], &t(&[3]), true).map(drop), index),
        ("index_put", a23.index_put(&[idx(&[0], &[1]), idx(&[-4], &[1])], &t(&[1]), false).map(drop), index),
        ("index_put", a23.index_put(&[idx(&[0, 1], &[2]), idx(&[0, 1, 2], &[3])], &t(&[1]), false).map(drop), shape),
        ("index_put", a23.index_put(&[idx(&[0, 1], &[2])], &t(&[2, 2]), false).map(drop), shape),
        ("masked_select", a23.masked_select(&a4).map(drop), shape),
        ("masked_scatter", a4.masked_scatter(&a23, &a34).map(drop), shape),
        ("masked_scatter", a23.masked_scatter(&Tensor::ones(&[2, 3]).unwrap(), &a4).map(drop), arg),
    ];
    // Broadcast indices addressing far more positions than memory: refused, not an abort.
    let huge = Tensor::scalar(0.0).broadcast_to(&[1 << 20, 1 << 20]).unwrap();
    let (col, row) = (
        Indices::new(vec![0; 1 << 20], &[1 << 20, 1]).unwrap(),
        Indices::new(vec![0; 1 << 20], &[1, 1 << 20]).unwrap(),
    );
    let e = huge.index_put(&[col, row], &Tensor::scalar(1.0), false).map(drop).expect_err("huge index_put");
    assert!(matches!(e.kind(), ErrorKind::WorkLimitExceeded { .. } | ErrorKind::OutOfMemory { .. }), "{e}");
    let huge_rows: Vec<(&str, Result<()>)> = vec![
        ("sort", drop_indices(huge.sort(1, false))),
        ("topk", drop_indices(huge.topk(2, 1, true, true))),
        ("median", drop_indices(huge.median(0, false))),
        ("any", huge.any(1, false).map(drop)),
        ("nonzero", huge.nonzero().map(drop)),
        ("masked_select", huge.masked_select(&Tensor::scalar(1.0)).map(drop)),
        ("scatter_value", huge.scatter_value(0, &idx(&[0], &[1, 1]), 1.0).map(drop)),
    ];
    // Whole-tensor any/all read the storage of a broadcast view, not its 2^40 logical elements.
    assert_eq!((huge.any_all().item().unwrap(), huge.all_all().item().unwrap()), (0.0, 0.0));
    for (op, r) in huge_rows {
        let e = r.expect_err(op);
        let k = e.kind();
        assert!(matches!(k, ErrorKind::WorkLimitExceeded { .. } | ErrorKind::OutOfMemory { .. }), "{op}: {e}");
    }
    for (op, r, ok) in rows {
        let e = r.expect_err(op);
        assert!(ok(e.kind()), "{op}: wrong kind {e}");
        assert!(e.to_string().contains(op), "{op}: message does not name the op: {e}");
    }
}
