//! Loader for the JAX golden fixtures in `tests/golden/<family>.json` (format in
//! `tools/reference/README.md`) and a mixed-tolerance comparison.

use forgia::Tensor;
use serde_json::Value;

/// One golden case.
pub struct Case {
    /// The case's name.
    pub name: String,
    /// The op it exercises.
    pub op: String,
    /// The op's attributes (integer inputs such as indices live here).
    pub attrs: Value,
    /// The float inputs.
    pub inputs: Vec<Tensor>,
    /// The cotangent of the output (absent for multi-output cases such as `split`).
    pub cotangent: Option<Tensor>,
    /// The expected output (absent for multi-output cases).
    pub output: Option<Tensor>,
    /// The expected VJP per input (`None` where the file says `null`).
    pub grads: Vec<Option<Tensor>>,
    /// The whole case as stored.
    pub raw: Value,
}

/// A tensor from a `{"shape": [...], "data": [...]}` object.
pub fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> =
        v["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    let data: Vec<f32> =
        v["data"].as_array().expect("data").iter().map(|d| d.as_f64().expect("number") as f32).collect();
    Tensor::from_vec(data, &shape).expect("golden tensor")
}

fn opt_tensor(v: &Value) -> Option<Tensor> {
    if v.is_null() {
        None
    } else {
        Some(tensor(v))
    }
}

/// Every case of a family.
pub fn load(family: &str) -> Vec<Case> {
    let path = format!("{}/tests/golden/{family}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    file["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            op: c["op"].as_str().unwrap_or_default().to_string(),
            attrs: c["attrs"].clone(),
            inputs: c["inputs"].as_array().map(|a| a.iter().map(tensor).collect()).unwrap_or_default(),
            cotangent: opt_tensor(&c["cotangent"]),
            output: opt_tensor(&c["output"]),
            grads: c["grads"].as_array().map(|a| a.iter().map(opt_tensor).collect()).unwrap_or_default(),
            raw: c.clone(),
        })
        .collect()
}

/// Asserts equal shapes and `|a - e| <= rel * (1 + |e|)` elementwise.
pub fn assert_close(actual: &Tensor, expected: &Tensor, rel: f32, what: &str) {
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    for (i, (a, e)) in actual.to_vec().iter().zip(expected.to_vec()).enumerate() {
        assert!((a - e).abs() <= rel * (1.0 + e.abs()), "{what}: element {i}: got {a}, expected {e}");
    }
}

/// Runs `f` on fresh variables made from the case's inputs, checks its output, then runs a
/// backward pass with the case's cotangent and checks every gradient the file gives (`null`
/// ones are skipped), all within `rel` (see [`assert_close`]).
pub fn check_case(case: &Case, rel: f32, f: impl FnOnce(&[Tensor]) -> forgia::Result<Tensor>) {
    let vars: Vec<Tensor> = case.inputs.iter().map(|t| t.clone().into_variable()).collect();
    let y = f(&vars).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    assert_close(&y, case.output.as_ref().expect("golden output"), rel, &case.name);
    y.backward_with_grad(case.cotangent.as_ref().expect("golden cotangent")).unwrap();
    for (i, (v, g)) in vars.iter().zip(&case.grads).enumerate() {
        if let Some(g) = g {
            let what = format!("{} grad {i}", case.name);
            assert_close(&v.grad().unwrap_or_else(|| panic!("{what}: no gradient")), g, rel, &what);
        }
    }
}

/// Runs [`check_case`] on every case of `family` that `apply` knows, and returns those cases.
///
/// `apply(case, inputs)` maps a case to its forgia call, or returns `None` for an op it does
/// not handle (a family file can be shared by several test files, each taking its own ops);
/// it is called once on the stored inputs to ask, then on fresh variables to check. Callers
/// assert on the number returned, so that a renamed op cannot silently drop its cases.
pub fn check_known(
    family: &str,
    rel: f32,
    apply: impl Fn(&Case, &[Tensor]) -> Option<forgia::Result<Tensor>>,
) -> Vec<Case> {
    let mut ran = Vec::new();
    for case in load(family) {
        if apply(&case, &case.inputs).is_none() {
            continue;
        }
        check_case(&case, rel, |xs| apply(&case, xs).expect("apply knew this op a moment ago"));
        ran.push(case);
    }
    ran
}
