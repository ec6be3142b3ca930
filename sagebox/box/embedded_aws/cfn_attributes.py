"""What the embedded AWS's own CloudFormation resources share: `Fn::GetAtt` of their `Arn`."""

from __future__ import annotations


class ArnAttribute:
    """Mixin for a moto CloudFormationModel whose only attribute is `Arn` (held in `self.arn`)."""

    arn: str

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name == "Arn":
            return self.arn
        raise UnformattedGetAttTemplateException()
