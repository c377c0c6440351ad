/// The `api` calls of missions, badges, levels, mission details (SDK: MissionsApi, LevelsApi, DetailsApi, the missions part of ActionsApi).
public enum DataAPIAchievementCalls {
    public static let calls: [DataAPICallSpec] = []
}
