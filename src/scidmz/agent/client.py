"""``AgentClient``: the controller's side of the agent's API (``actuators.agent_client``, re-exported
here where the agent's own modules are; it sits with the actuators so that the hardware plant can use it)."""

from ..actuators.agent_client import AgentClient

__all__ = ["AgentClient"]
