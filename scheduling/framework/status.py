from dataclasses import dataclass, field
from enum import StrEnum


class Code(StrEnum):
    SUCCESS = "Success"
    # The node cannot take the task now; a reason says why and diagnostics count it.
    UNSCHEDULABLE = "Unschedulable"
    # The node cannot take the task whatever is freed (no preemption would help).
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"
    SKIP = "Skip"


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = field(default_factory=tuple)
    plugin: str = ""
    # The attempt code (reasons.*) a PreFilter, Permit or Bind rejection ends the attempt with; "" lets the
    # framework derive it.
    attempt_code: str = ""

    @property
    def is_success(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @classmethod
    def unschedulable(cls, reason: str, *, plugin: str = "", unresolvable: bool = False,
                      attempt_code: str = "") -> "Status":
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return cls(code=code, reasons=(reason,), plugin=plugin, attempt_code=attempt_code)


SUCCESS = Status()
SKIP = Status(Code.SKIP)
