"""True/false reward that looks for the keyword in the reply.

Models wrap the verdict in prose ("The statement is true.", "**True**"), so
the reply counts as answering true when the word appears in it.
"""


def reward(completion, answer, **kwargs):
    text = completion[-1]["content"].lower()
    said_true = "true" in text
    return 1.0 if said_true == (answer.strip().lower() == "true") else 0.0
