"""A continued run re-evaluates its checkpoint when the weights changed, not when they did not
(``paravt.evaluation.heldout.fresh`` keyed on ``checkpoint_identity``)."""

from paravt.evaluation.fingerprints import checkpoint_identity
from paravt.evaluation.heldout import fresh


def test_an_evaluation_is_redone_only_for_other_weights(tmp_path, capsys):
    model = tmp_path / "checkpoint" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights at step 60")
    (model / "config.json").write_text("{}")
    target = tmp_path / "eval"
    fresh(target, checkpoint_identity(model), twins=("_counterfactual",))
    (target / "results.jsonl").write_text('{"id": "a"}\n')
    (tmp_path / "eval_counterfactual" / "results.jsonl").write_text('{"id": "a"}\n')
    fresh(target, checkpoint_identity(model), twins=("_counterfactual",))  # same weights: the results stay (a resume)
    assert (target / "results.jsonl").is_file() and (tmp_path / "eval_counterfactual" / "results.jsonl").is_file()
    (model / "model.safetensors").write_bytes(b"weights at step 61")  # same path, other weights
    fresh(target, checkpoint_identity(model), twins=("_counterfactual",))
    assert not (target / "results.jsonl").exists() and not (tmp_path / "eval_counterfactual" / "results.jsonl").exists()
    assert "the checkpoint changed since it was evaluated" in capsys.readouterr().out
    # an evaluation written before checkpoint.json existed is redone too
    (target / "checkpoint.json").unlink()
    (target / "results.jsonl").write_text("{}\n")
    fresh(target, checkpoint_identity(model), twins=())
    assert not (target / "results.jsonl").exists()


def test_an_edited_chat_template_is_another_checkpoint(tmp_path):
    """Every file that shapes what the model sees is in the identity: the chat template and the tokenizer too."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "chat_template.jinja").write_text("{{ messages }}")
    (model / "README.md").write_text("notes")
    before = checkpoint_identity(model)
    (model / "README.md").write_text("other notes")  # documentation does not change what the model sees
    assert checkpoint_identity(model) == before
    (model / "chat_template.jinja").write_text("{{ messages }} edited")
    assert checkpoint_identity(model) != before


def test_a_damaged_evaluation_marker_is_named_and_the_evaluation_redone(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    target = tmp_path / "eval"
    fresh(target, checkpoint_identity(model))
    (target / "results.jsonl").write_text('{"id": "a"}\n')
    for damage in ("{not json", "[1, 2]", '{"identity": 5}'):
        (target / "checkpoint.json").write_text(damage)
        (target / "results.jsonl").write_text('{"id": "a"}\n')
        fresh(target, checkpoint_identity(model))  # no traceback: its rows cannot be tied to the checkpoint
        assert f"{target / 'checkpoint.json'} is missing or unreadable: evaluating again" in capsys.readouterr().out
        assert not (target / "results.jsonl").exists()
