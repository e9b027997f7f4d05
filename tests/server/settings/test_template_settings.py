"""The chat template settings: KoboldCpp's keys and llama-server's flags for one setting each,
.kcpps files both ways, the variables every render receives, and the chosen template read,
found by name or refused with a line naming the problem before anything loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.models.files import bundled_model_path
from server.process import load_settings as load_settings_module
from server.process.exit_codes import EXIT_USAGE
from server.process.load_settings import TemplateSettingError, load_settings, template_choice
from server.process.start import StartFailed, load_models
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError, load_kcpps, save_kcpps

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"


def settings_of(*argv: str) -> HearthSettings:
    return parse_command_line(list(argv)).settings


def test_llama_server_s_flags_and_koboldcpp_s_set_the_same_settings() -> None:
    llama = settings_of(
        "--chat-template-file",
        "t.jinja",
        "--chat-template-kwargs",
        '{"greeting": "hi"}',
        "--reasoning",
        "off",
        "--reasoning-effort",
        "High",
    )
    kobold = settings_of(
        "--jinjatemplate",
        "t.jinja",
        "--jinja_kwargs",
        '{"greeting": "hi"}',
        "--jinjathink",
        "false",
        "--reasoningeffort",
        "high",
    )
    for settings in (llama, kobold):
        assert settings.jinjatemplate == "t.jinja"
        assert (settings.jinjathink, settings.reasoningeffort) == ("false", "high")
        assert settings.template_kwargs == {
            "greeting": "hi",
            "enable_thinking": False,
            "reasoning_effort": "high",
        }
    assert settings_of("--chat-template", "llama3").chat_template == "llama3"
    assert settings_of("-rea", "auto").jinjathink == "default"


def test_defaults_give_the_template_nothing_extra() -> None:
    settings = HearthSettings()
    assert (settings.jinjatemplate, settings.chat_template, settings.jinja_kwargs) == (
        None,
        None,
        "",
    )
    assert (settings.jinjathink, settings.reasoningeffort) == ("default", "default")
    assert settings.template_kwargs == {}


def test_jinja_thinking_and_think_effort_win_over_the_same_names_in_the_kwargs() -> None:
    settings = HearthSettings(
        jinja_kwargs='{"enable_thinking": true, "reasoning_effort": "low", "x": 1}',
        jinjathink="off",
        reasoningeffort="medium",
    )
    assert settings.template_kwargs == {
        "enable_thinking": False,
        "reasoning_effort": "medium",
        "x": 1,
    }


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("true", "true"),
        ("on", "true"),
        (True, "true"),
        ("OFF", "false"),
        (False, "false"),
        ("auto", "default"),
        ("", "default"),
        (None, "default"),
    ],
)
def test_jinja_thinking_reads_koboldcpp_s_and_llama_server_s_words(
    written: object, read: str
) -> None:
    assert HearthSettings.model_validate({"jinjathink": written}).jinjathink == read


def test_bad_values_are_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError, match="jinja_kwargs") as refused:
        settings_of("--chat-template-kwargs", "{not json")
    assert "not valid JSON" in str(refused.value)
    with pytest.raises(ValidationError, match="must be a JSON object"):
        HearthSettings(jinja_kwargs="[1, 2]")
    with pytest.raises(ValidationError, match="jinjathink"):
        HearthSettings.model_validate({"jinjathink": "sometimes"})
    with pytest.raises(ValidationError, match="reasoningeffort"):
        HearthSettings.model_validate({"reasoningeffort": "extreme"})


def test_a_koboldcpp_file_round_trips(tmp_path: Path) -> None:
    written = {
        "jinjatemplate": "",  # KoboldCpp's "not set"
        "jinja_kwargs": '{"enable_thinking": false}',
        "jinjathink": "true",
        "reasoningeffort": "low",
        "chatcompletionsadapter": "AutoGuess",
    }
    path = tmp_path / "kobold.kcpps"
    path.write_text(json.dumps(written))
    loaded = load_kcpps(path)
    assert loaded.jinjatemplate is None and loaded.jinjathink == "true"
    assert loaded.template_kwargs == {"enable_thinking": True, "reasoning_effort": "low"}
    again = json.loads(save_kcpps(loaded, tmp_path / "again.kcpps").read_text())
    assert again["jinja_kwargs"] == written["jinja_kwargs"]
    assert (again["jinjathink"], again["reasoningeffort"]) == ("true", "low")
    assert again["chatcompletionsadapter"] == "AutoGuess"
    keys = ("jinjatemplate", "chat_template", "jinja_kwargs", "jinjathink", "reasoningeffort")
    reloaded = load_kcpps(tmp_path / "again.kcpps")
    assert [getattr(reloaded, key) for key in keys] == [getattr(loaded, key) for key in keys]
    path.write_text(json.dumps({"jinja_kwargs": "{oops"}))
    with pytest.raises(SettingsFileError, match="jinja_kwargs"):
        load_kcpps(path)


def test_the_chosen_template_is_read_named_or_taken_as_jinja() -> None:
    marked = FIXTURES / "marked.jinja"
    chosen = template_choice(HearthSettings(jinjatemplate=str(marked), jinjathink="on"))
    assert chosen.source == marked.read_text()
    assert chosen.origin == f"the file {marked}"
    assert chosen.kwargs == {"enable_thinking": True}
    named = template_choice(HearthSettings(chat_template=" ChatML "))
    assert named.origin == "the built-in chatml" and "<|im_start|>" in (named.source or "")
    text = "{{ messages[0].content }}\n"
    given = template_choice(HearthSettings(chat_template=text))
    assert (given.source, given.origin) == (text, "the Jinja text of --chat-template")
    own = template_choice(HearthSettings())
    assert (own.source, own.origin) == (None, "the model's own")
    assert load_settings(HearthSettings(chat_template="llama3")).template.source is not None


def test_an_unusable_choice_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jinja"
    problems = {
        f"--chat-template-file {missing}: no such file": {"jinjatemplate": str(missing)},
        "--chat-template 'chatmlx': neither Jinja text nor a built-in template name (chatml,": {
            "chat_template": "chatmlx"
        },
        f"--chat-template-file {FIXTURES / 'broken.jinja'}: the template does not compile: "
        "line 1: unexpected '}'": {"jinjatemplate": str(FIXTURES / "broken.jinja")},
        "--chat-template: the template does not compile": {"chat_template": "{{ x"},
        "not both": {"jinjatemplate": str(FIXTURES / "marked.jinja"), "chat_template": "chatml"},
    }
    for message, values in problems.items():
        with pytest.raises(TemplateSettingError) as refused:
            template_choice(HearthSettings.model_validate(values))
        assert message in str(refused.value)


def test_the_server_stops_before_loading_anything_on_a_missing_template(tmp_path: Path) -> None:
    settings = HearthSettings(
        model_param=str(tmp_path / "no-model-either.gguf"),
        jinjatemplate=str(tmp_path / "t.jinja"),
    )
    with pytest.raises(StartFailed) as failed:
        load_models(settings)
    assert failed.value.exit_code == EXIT_USAGE
    assert str(failed.value) == f"--chat-template-file {tmp_path / 't.jinja'}: no such file"


def test_the_load_settings_are_built_once_for_every_model_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2: Path
) -> None:
    """The chosen template is read and compiled once at start, however many models the
    server loads, switches to or describes (it was compiled four times, once per model)."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "one.gguf").symlink_to(bundled_model_path())
    (folder / "two.gguf").symlink_to(smollm2)
    compiled: list[str] = []
    real_compile = load_settings_module.compile_template
    monkeypatch.setattr(
        load_settings_module,
        "compile_template",
        lambda source: compiled.append(source) or real_compile(source),
    )
    settings = HearthSettings(
        model_param=str(folder / "one.gguf"),
        modeldir=str(folder),
        chat_template="chatml",
        contextsize=512,
    )
    pool, choice = load_models(settings)
    try:
        other = next(name for name, path in choice.listed() if path and path.name == "two.gguf")
        pool.use(other)
        assert pool.current_name == other
        assert pool.current.chat_template is not None
    finally:
        pool.close()
    assert len(compiled) == 1
