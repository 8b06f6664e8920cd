//! Loader for the JAX golden fixtures in `tests/golden/<family>.json` (format in
//! `tools/reference/README.md`) and a mixed-tolerance comparison.
#![allow(dead_code, unreachable_pub)]

use forgia::Tensor;
use serde_json::Value;

/// One golden case: an op applied to inputs, with the reference output and the VJP.
pub struct Case {
    /// The case name (unique within a family).
    pub name: String,
    /// The op name.
    pub op: String,
    /// The op's attributes (integer inputs such as labels live here too).
    pub attrs: Value,
    /// The float inputs.
    pub inputs: Vec<Tensor>,
    /// The cotangent the grads were computed with, when the case has one.
    pub cotangent: Option<Tensor>,
    /// The reference output, when the case has one.
    pub output: Option<Tensor>,
    /// The VJP with respect to each float input (`None` where the fixture says `null`).
    pub grads: Vec<Option<Tensor>>,
    /// The whole case as parsed.
    pub raw: Value,
}

/// Parses a `{"shape": [...], "data": [...]}` object into a constant tensor.
pub fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> =
        v["shape"].as_array().expect("tensor shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
    let data: Vec<f32> =
        v["data"].as_array().expect("tensor data").iter().map(|x| x.as_f64().expect("number") as f32).collect();
    Tensor::from_vec(data, &shape).expect("golden tensor fits its shape")
}

fn opt_tensor(v: &Value) -> Option<Tensor> {
    if v.is_null() {
        None
    } else {
        Some(tensor(v))
    }
}

/// Loads every case of a family (`nn` reads `tests/golden/nn.json`).
pub fn load(family: &str) -> Vec<Case> {
    let path = format!("{}/tests/golden/{family}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let root: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    let cases = root["cases"].as_array().unwrap_or_else(|| panic!("{path}: no cases array"));
    cases
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            op: c["op"].as_str().unwrap_or_default().to_string(),
            attrs: c.get("attrs").cloned().unwrap_or(Value::Null),
            inputs: c
                .get("inputs")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(tensor).collect())
                .unwrap_or_default(),
            cotangent: c.get("cotangent").and_then(opt_tensor),
            output: c.get("output").and_then(opt_tensor),
            grads: c
                .get("grads")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(opt_tensor).collect())
                .unwrap_or_default(),
            raw: c.clone(),
        })
        .collect()
}

/// Asserts same shape and `|a - b| <= rel * (1 + |b|)` elementwise.
pub fn assert_close(actual: &Tensor, expected: &Tensor, rel: f32, what: &str) {
    assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
    let (a, b) = (actual.to_vec(), expected.to_vec());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= rel * (1.0 + y.abs()), "{what}: element {i}: got {x}, expected {y}");
    }
}
