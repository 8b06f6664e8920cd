//! `forgia gradcheck` rows for the selections (sort, topk, kthvalue, median) and the index
//! writes (scatter, index_copy, index_put, masked_select, masked_scatter), and `where_` fed a
//! mask built by a comparison. Selections draw distinct values, so no tie sits within the
//! finite-difference step; write indices include duplicates (last write wins).

use forgia::{Indices, Tensor};

use super::inputs::{distinct, index_tensor, mask, normal};
use super::{case, Case};

/// The rows.
pub(super) fn masks_sort_cases() -> Vec<Case> {
    vec![
        case("sort", |r| vec![distinct(&[3, 4], r)], |x| Ok(x[0].sort(1, false)?.0)),
        case("sort (descending)", |r| vec![distinct(&[4, 3], r)], |x| Ok(x[0].sort(0, true)?.0)),
        case("topk", |r| vec![distinct(&[3, 5], r)], |x| Ok(x[0].topk(2, -1, true, true)?.0)),
        case("topk (smallest, unsorted)", |r| vec![distinct(&[5, 3], r)], |x| Ok(x[0].topk(3, 0, false, false)?.0)),
        case("kthvalue", |r| vec![distinct(&[3, 5], r)], |x| Ok(x[0].kthvalue(2, 1, false)?.0)),
        case("median", |r| vec![distinct(&[2, 3, 4], r)], |x| Ok(x[0].median(1, true)?.0)),
        case("median_all", |r| vec![distinct(&[3, 4], r)], |x| x[0].median_all()),
        case(
            "scatter",
            |r| vec![normal(&[3, 4], r), index_tensor(&[3, 3], 4, r), normal(&[3, 3], r)],
            |x| x[0].scatter(1, &super::inputs::as_indices(&x[1])?, &x[2]),
        ),
        case(
            "scatter_value",
            |r| vec![normal(&[4, 3], r), index_tensor(&[2, 3], 4, r)],
            |x| x[0].scatter_value(0, &super::inputs::as_indices(&x[1])?, -0.5),
        ),
        case(
            "index_copy",
            |r| vec![normal(&[4, 3], r), index_tensor(&[3], 4, r), normal(&[3, 3], r)],
            |x| x[0].index_copy(0, &super::inputs::as_indices(&x[1])?, &x[2]),
        ),
        case(
            "index_put",
            |r| vec![normal(&[3, 4], r), normal(&[3], r)],
            |x| x[0].index_put(&[Indices::from(vec![0i64, 2, 0]), Indices::from(vec![1i64, -1, 1])], &x[1], false),
        ),
        case(
            "index_put (accumulate)",
            |r| vec![normal(&[3, 4], r), normal(&[1, 4], r)],
            |x| x[0].index_put(&[Indices::new(vec![1, 1, 2], &[3, 1])?], &x[1], true),
        ),
        case(
            "masked_select",
            |r| vec![normal(&[3, 4], r), mask(&[1, 4], r)],
            |x| x[0].masked_select(&x[1].gt_scalar(0.5)),
        ),
        case(
            "masked_scatter",
            |r| vec![normal(&[3, 4], r), mask(&[3, 4], r), normal(&[12], r)],
            |x| x[0].masked_scatter(&x[1], &x[2]),
        ),
        case(
            "where (comparison mask)",
            |r| vec![normal(&[3, 4], r), normal(&[4], r)],
            |x| Tensor::where_(&x[0].gt(&x[1].detach())?, &x[0], &x[1]),
        ),
    ]
}
