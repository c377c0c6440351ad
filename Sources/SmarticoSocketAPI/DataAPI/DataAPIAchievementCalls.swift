/// The `api` calls of missions, badges, levels, mission details (SDK: MissionsApi, LevelsApi, DetailsApi, the missions part of ActionsApi).
public enum DataAPIAchievementCalls {
    public static let calls: [DataAPICallSpec] = [
        DataAPICallSpec("missions.list", sdk: "getMissions", cids: [502], result: "[TMissionOrBadge]",
                        "the user's missions with their availability status, tasks and recurrence"),
        DataAPICallSpec("badges.list", sdk: "getBadges", cids: [502], result: "[TMissionOrBadge]",
                        "the user's badges with their time-limit state"),
        DataAPICallSpec("levels.list", sdk: "getLevels", cids: [500], result: "[TLevel]",
                        "the label's level ladder in server order, with ordinal_position"),
        DataAPICallSpec("missions.opt_in", sdk: "requestMissionOptIn", role: .control,
                        args: [DataAPIArg("mission_id", .integer, required: true, "the mission's id (not 0)")],
                        cids: [525], result: "TMissionOptInResult", "opt in to a mission that requires it"),
        DataAPICallSpec("missions.claim_reward", sdk: "requestMissionClaimReward", role: .control,
                        args: [DataAPIArg("mission_id", .integer, required: true, "the mission's id (not 0)"),
                               DataAPIArg("ach_completed_id", .integer, required: true, "the completion to claim: the mission's ach_completed_id")],
                        cids: [539], result: "TMissionClaimRewardResult", "claim a completed mission's prize"),
    ]
}
