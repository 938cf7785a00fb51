"""Structured outputs end to end: response_format json_schema through the openai client's parse(), the
`grammar` field (GBNF), and the 400s for schemas and grammars the server cannot use."""
import json
import os
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Annotated, Optional

import openai
import pytest
import requests
from pydantic import BaseModel, Field

URL = os.environ.get("KVLAB_E2E_URL", "http://127.0.0.1:8080")
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
Short = Annotated[str, Field(max_length=40)]


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Address(BaseModel):
    city: Short
    country: Short


class Person(BaseModel):
    name: Short
    age: int
    favorite_color: Color
    hobbies: list[Short] = Field(max_length=4)
    address: Address
    nickname: Optional[Short] = None


PEOPLE = ["a retired sailor from Lisbon", "a young painter in Kyoto", "a baker in Lyon", "a teacher in Nairobi",
          "a pilot from Oslo"]


@pytest.fixture(scope="session")
def client():
    return openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0, timeout=300)


def parse_person(client, i, temperature):
    messages = [{"role": "user", "content": f"Invent {PEOPLE[i % len(PEOPLE)]} and describe them as JSON."}]
    r = client.beta.chat.completions.parse(model=MODEL_ID, messages=messages, response_format=Person,
                                           max_tokens=400, temperature=temperature, seed=i)
    choice = r.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    assert isinstance(choice.message.parsed, Person)
    Person.model_validate_json(choice.message.content)  # the raw text validates too
    return choice.message.parsed


@pytest.mark.repeated
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_parse_pydantic_model_20_of_20(client, temperature):
    with ThreadPoolExecutor(4) as pool:
        people = list(pool.map(lambda i: parse_person(client, i, temperature), range(20)))
    assert len(people) == 20
    if temperature > 0:
        assert len({p.model_dump_json() for p in people}) > 1  # the seeds made different people


def test_json_schema_streamed_matches_whole(client):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 30}}, "required": ["answer"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=60, temperature=0,
                                       response_format=rf)
    assert r.choices[0].finish_reason == "stop"
    assert set(json.loads(r.choices[0].message.content)) == {"answer"}
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL_ID, messages=messages, max_tokens=60, temperature=0, stream=True, response_format=rf)
        if c.choices]
    assert "".join(parts) == r.choices[0].message.content


def test_json_schema_truncated_is_length(client):
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "array", "items": {"type": "integer"}}}}
    r = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Count to 100."}],
                                       max_tokens=5, temperature=0, response_format=rf)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content.startswith("[")


def test_unsatisfiable_and_unsupported_schemas_are_400(client):
    messages = [{"role": "user", "content": "hi"}]
    for schema, words in [({"type": "string", "minLength": 5, "maxLength": 2}, "minLength > maxLength"),
                          ({"enum": []}, "enum is empty"), ({"not": {}}, "'not'"),
                          ({"type": "object", "required": ["x"], "additionalProperties": False}, "'x'")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=8, response_format={
                "type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}})
        assert e.value.body["param"] == "response_format.json_schema.schema"
        assert words in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=8, response_format={
            "type": "json_schema", "json_schema": {"name": "a", "strict": True,
                                                   "schema": {"type": "integer", "minimum": 3}}})
    assert "'minimum'" in e.value.body["message"]


def test_gbnf_grammar_field_both_endpoints():
    grammar = 'root ::= "The answer is " ("yes" | "no") "."\n'
    for path, body in [("/v1/completions", {"prompt": "Is the sky blue?"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Is the sky blue?"}]})]:
        r = requests.post(URL + path, json={**body, "grammar": grammar, "max_tokens": 20, "temperature": 1, "seed": 3},
                          timeout=120)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        text = choice["text"] if "text" in choice else choice["message"]["content"]
        assert text in ("The answer is yes.", "The answer is no.")
        assert choice["finish_reason"] == "stop"


def test_bad_grammar_is_400_with_the_position():
    bad = 'root ::= "a" item\nitem ::= [0-9\n'
    r = requests.post(URL + "/v1/completions", json={"prompt": "x", "grammar": bad}, timeout=30)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "grammar"
    assert "line 2, column 14" in err["message"]
    r = requests.post(URL + "/v1/completions", json={"prompt": "x", "grammar": "root ::= root \"a\""}, timeout=30)
    assert r.status_code == 400 and "left-recursive" in r.json()["error"]["message"]
