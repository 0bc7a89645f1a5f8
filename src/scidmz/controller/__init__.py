"""Control: the loop runner, the MLC control law and its anti-windup PI stage."""
