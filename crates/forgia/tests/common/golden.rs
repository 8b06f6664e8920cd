//! Loader for the JAX golden fixtures in `tests/golden/<family>.json` (format in
//! `tools/reference/README.md`) and a mixed-tolerance comparison.
#![allow(dead_code, unreachable_pub)]

use forgia::Tensor;
use serde_json::Value;

/// One golden case: the op, its attrs, float inputs, cotangent, expected output and VJPs.
pub struct Case {
    /// The case's unique name.
    pub name: String,
    /// The op under test.
    pub op: String,
    /// Op attributes (axes, scalars, integer masks/indices as `{shape, data}`).
    pub attrs: Value,
    /// Float inputs, as constants.
    pub inputs: Vec<Tensor>,
    /// The cotangent the grads were computed with (absent for multi-output cases).
    pub cotangent: Option<Tensor>,
    /// The expected output (absent for multi-output cases).
    pub output: Option<Tensor>,
    /// The expected VJP per input (`None` where the file has `null`).
    pub grads: Vec<Option<Tensor>>,
    /// The whole case as parsed, for extra fields (`outputs`, `output_indices`, `note`, ...).
    pub raw: Value,
}

/// Loads every case of `tests/golden/<family>.json`.
pub fn load(family: &str) -> Vec<Case> {
    let path = format!("{}/tests/golden/{family}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    let cases = doc["cases"].as_array().unwrap_or_else(|| panic!("{path}: no cases array"));
    cases
        .iter()
        .map(|c| {
            let opt = |v: &Value| if v.is_null() { None } else { Some(tensor(v)) };
            Case {
                name: c["name"].as_str().unwrap_or_default().to_string(),
                op: c["op"].as_str().unwrap_or_default().to_string(),
                attrs: c.get("attrs").cloned().unwrap_or(Value::Null),
                inputs: c["inputs"].as_array().map(|a| a.iter().map(tensor).collect()).unwrap_or_default(),
                cotangent: c.get("cotangent").and_then(opt),
                output: c.get("output").and_then(opt),
                grads: c["grads"].as_array().map(|a| a.iter().map(opt).collect()).unwrap_or_default(),
                raw: c.clone(),
            }
        })
        .collect()
}

/// A constant tensor from a `{"shape": [...], "data": [...]}` object (integers become f32).
pub fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("tensor without shape: {v}"))
        .iter()
        .map(|d| d.as_u64().expect("shape entries are integers") as usize)
        .collect();
    let data: Vec<f32> = v["data"]
        .as_array()
        .unwrap_or_else(|| panic!("tensor without data: {v}"))
        .iter()
        .map(|d| d.as_f64().expect("data entries are numbers") as f32)
        .collect();
    Tensor::from_vec(data, &shape).expect("golden tensor data fills its shape")
}

/// Panics unless `actual` has `expected`'s shape and every element meets
/// `|a - e| <= rel * (1 + |e|)`.
pub fn assert_close(actual: &Tensor, expected: &Tensor, rel: f32, what: &str) {
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    let (a, e) = (actual.to_vec(), expected.to_vec());
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let ok = (x - y).abs() <= rel * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()) || x == y;
        assert!(ok, "{what}: element {i}: got {x}, expected {y} (rel {rel})\n got {a:?}\nwant {e:?}");
    }
}
