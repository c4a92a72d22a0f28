use super::*;
use serde_json::json;

fn validate(schema: &Value, value: &Value) -> Vec<String> {
    CompiledSchema::compile(schema).unwrap().check(value)
}

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["sessionId"],
        "additionalProperties": false,
        "properties": {
            "sessionId": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500},
            "eventType": {"type": "string", "enum": ["stdout", "stderr"]},
            "add": {"type": "array", "items": {"type": "string"}}
        }
    })
}

#[test]
fn accepts_valid_input() {
    assert!(validate(&schema(), &json!({"sessionId": "a", "limit": 5, "add": ["x"]})).is_empty());
}

#[test]
fn reports_each_problem_with_its_path() {
    let errs = validate(&schema(), &json!({"limit": 900, "eventType": "x", "add": [1], "bogus": true}));
    let all = errs.join("\n");
    assert!(all.contains("args.sessionId is required"), "{all}");
    assert!(all.contains("args.limit must be <= 500"), "{all}");
    assert!(all.contains("args.eventType must be one of \"stdout\", \"stderr\", got \"x\""), "{all}");
    assert!(all.contains("args.add[0] must be a string, got number 1"), "{all}");
    assert!(all.contains("args.bogus is not a known field (known: sessionId, limit, eventType, add)"), "{all}");
    assert_eq!(errs.len(), 5, "{all}");
}

#[test]
fn wrong_top_level_type() {
    assert_eq!(validate(&schema(), &json!([1])), vec!["args must be an object, got array".to_string()]);
}

#[test]
fn integer_fields_take_integers_only() {
    let errs = validate(&schema(), &json!({"sessionId": "a", "limit": 5.0}));
    assert_eq!(errs, vec!["args.limit must be an integer, got number 5.0".to_string()]);
    let errs = validate(&schema(), &json!({"sessionId": "a", "limit": 5.5}));
    assert_eq!(errs, vec!["args.limit must be an integer, got number 5.5".to_string()]);
    // Where a number is allowed, 5.0 is a number.
    let either = json!({"type": ["number", "string"]});
    assert!(validate(&either, &json!(5.0)).is_empty());
    assert!(validate(&json!({"type": ["integer", "string"]}), &json!("-5s")).is_empty());
}

/// The keywords the hand-written subset ignored (issue 17, item 12).
#[test]
fn keywords_the_old_subset_ignored_are_enforced() {
    let cases = [
        (json!({"type": "string", "pattern": "^[a-z]+$"}), json!("ABC"), "must match the regular expression ^[a-z]+$"),
        (json!({"type": "string", "maxLength": 3}), json!("abcd"), "must have at most 3 characters, got 4"),
        (json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}), json!(true), "matches none of the 2 allowed forms"),
        (json!({"type": "number", "exclusiveMinimum": 0}), json!(0), "must be > 0, got 0"),
        (json!({"type": "array", "uniqueItems": true}), json!([1, 1]), "must not repeat an item"),
    ];
    for (schema, bad, expected) in cases {
        let errs = validate(&schema, &bad);
        assert!(errs.len() == 1 && errs[0].starts_with("args ") && errs[0].contains(expected), "{schema}: {errs:?}");
    }
}

#[test]
fn one_of_says_what_each_form_wanted() {
    let s = json!({"type": "object", "properties": {"at": {"oneOf": [
        {"type": "string", "pattern": "^0x"},
        {"type": "object", "required": ["line"]}
    ]}}});
    let errs = validate(&s, &json!({"at": "12"}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("args.at matches none of the 2 allowed forms: (1) args.at must match the regular expression ^0x"), "{errs:?}");
    assert!(errs[0].contains("(2) args.at must be an object, got string"), "{errs:?}");
}

#[test]
fn a_flood_of_problems_is_cut() {
    let s = json!({"type": "array", "items": {"type": "string"}});
    let errs = validate(&s, &json!((0..100).collect::<Vec<_>>()));
    assert_eq!(errs.len(), MAX_REPORTED + 1);
    assert_eq!(errs.last().unwrap(), &format!("and {} more problems", 100 - MAX_REPORTED));
}

#[test]
fn long_values_are_shortened() {
    let s = json!({"enum": ["a"]});
    let errs = validate(&s, &json!("x".repeat(10_000)));
    assert!(errs[0].len() < 300 && errs[0].contains("(10002 characters)"), "{errs:?}");
}

#[test]
fn an_invalid_schema_is_refused_at_compile() {
    let e = CompiledSchema::compile(&json!({"type": "strnig"})).unwrap_err();
    assert!(e.contains("not a valid JSON Schema"), "{e}");
    let e = CompiledSchema::compile(&json!({"properties": {"x": {"minLength": -1}}})).unwrap_err();
    assert!(e.contains("/properties/x/minLength"), "{e}");
    let e = CompiledSchema::compile(&json!({"type": "string", "pattern": "(unclosed"})).unwrap_err();
    assert!(e.contains("not a valid JSON Schema"), "{e}");
}

#[test]
fn odd_field_names_are_quoted() {
    let s = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let errs = validate(&s, &json!({"A-B": 1}));
    assert_eq!(errs, vec!["args[\"A-B\"] must be a string, got number 1".to_string()]);
}
