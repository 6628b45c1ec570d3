"""The rule-file models: a closed, strict schema (unknown keys fail) for every table.

One home below both readers: `service.rules` compiles the classification tables,
`service.notify` the notification ones, and neither imports the other for models.
`errtriage schema` publishes the JSON Schema of `rulefile.RuleFile` for editors.

    base      the strict base model and the id patterns
    match     the match language of class rules (text conditions, status ranges)
    cases     a rule's or provider's test cases
    classes   the class and reason vocabulary, class rules, recovery defaults (classes/)
    providers provider detection (providers/)
    examples  labelled reports the learned fallback trains on (examples/)
    notify    channels and routes (routes/), silences (silences/)
    rulefile  one YAML file of any table
"""
