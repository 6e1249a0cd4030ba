"""An async reward in the verifiers style: the last <answer> tag of the
final assistant message, compared case-insensitively after trimming."""
import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _parsed(completion):
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


async def reward(completion, answer, **kwargs):
    parsed = _parsed(completion)
    return 1.0 if parsed is not None and parsed.lower() == answer.strip().lower() else 0.0


async def reward_exploit(completion, answer, **kwargs):
    # Bug: containment instead of equality.
    parsed = _parsed(completion)
    return 1.0 if parsed is not None and answer.strip().lower() in parsed.lower() else 0.0


async def reward_false_accept(completion, answer, **kwargs):
    # Bug: only the first word of the tag is compared.
    parsed = _parsed(completion)
    return 1.0 if parsed and parsed.split()[0].lower() == answer.strip().lower() else 0.0
